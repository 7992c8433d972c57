"""Fixtures of the gate tests: a fresh A/A pool for each, and the turn-session tests' own.

Every test starts with an empty ``gates.control_pool`` pool, so no test is lent the
A/A rounds of another. The turn-session tests (``test_turns.py``,
``test_turns_overhead.py``) get one reference of the shared problem per module, a round
setup on it, and run once per way a turn child starts (spawned, forked from the zygote).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

import gates.perf as perf
from gates.cascade import round_setup
from gates.control_pool import ControlPool
from gates.perf import RoundSetup
from gates.reference import ReferenceBundle
from gates.runner import forking_from
from gates.zygote import Zygote
from tests.support.turn_sessions import LAUNCHES, SETTINGS, launching, reference


@pytest.fixture(autouse=True)
def fresh_control_pool() -> Iterator[ControlPool]:
    # not through monkeypatch: an autouse fixture that asks for it creates every test's
    # monkeypatch first, so it undoes last, which changes every test's teardown order
    saved = perf.CONTROL_POOL
    perf.CONTROL_POOL = pool = ControlPool()
    yield pool
    perf.CONTROL_POOL = saved


@pytest.fixture(scope="module")
def bundle(
    gates_env: Path, cpu_zygote: Zygote | None, tmp_path_factory: pytest.TempPathFactory
) -> ReferenceBundle:
    with forking_from("cpu", cpu_zygote):  # the reference child: no fresh torch import
        return reference(tmp_path_factory)


@pytest.fixture
def setup(bundle: ReferenceBundle) -> RoundSetup:
    return round_setup(bundle, SETTINGS)


@pytest.fixture(params=LAUNCHES)
def launch(request: pytest.FixtureRequest) -> Iterator[str]:
    with launching(request) as how:
        yield how
