"""Fixtures of the turn-session tests (``test_turns.py``, ``test_turns_overhead.py``).

One reference of the shared problem per module, a round setup on it, and each test
once per way a turn child starts (spawned, forked from the zygote).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from gates.cascade import round_setup
from gates.perf import RoundSetup
from gates.reference import ReferenceBundle
from tests.support.turn_sessions import LAUNCHES, SETTINGS, launching, reference


@pytest.fixture(scope="module")
def bundle(gates_env: Path, tmp_path_factory: pytest.TempPathFactory) -> ReferenceBundle:
    return reference(tmp_path_factory)


@pytest.fixture
def setup(bundle: ReferenceBundle) -> RoundSetup:
    return round_setup(bundle, SETTINGS)


@pytest.fixture(params=LAUNCHES)
def launch(request: pytest.FixtureRequest) -> Iterator[str]:
    with launching(request) as how:
        yield how
