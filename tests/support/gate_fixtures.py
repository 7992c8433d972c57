"""Gate-test fixtures: small problem sizes for the CPU, a private KERNELOPT_HOME, a zygote."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from gates.runner import forking_from, verified_zygote
from gates.zygote import Zygote


@pytest.fixture(scope="session")
def gates_env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Children inherit this environment: small problem sizes (CPU), a scratch home."""
    home = tmp_path_factory.mktemp("gates-home")
    with pytest.MonkeyPatch.context() as env:  # restored when the session ends
        env.setenv("KERNELOPT_GATES_SMALL", "1")
        env.setenv("KERNELOPT_HOME", str(home))
        yield home


@pytest.fixture(scope="session")
def cpu_zygote(gates_env: Path) -> Iterator[Zygote | None]:
    """One verified CPU zygote for the session, started once and registered by nobody.

    Only tests that ask (``cpu_launcher``) fork from it: a test that spawns its
    children, wherever it runs in the session, never meets it.
    """
    with verified_zygote("cpu") as (zygote, _):
        yield zygote


@pytest.fixture
def cpu_launcher(cpu_zygote: Zygote | None) -> Iterator[bool]:
    """This test's gate jobs fork from the session's CPU zygote (children still start fresh)."""
    with forking_from("cpu", cpu_zygote):
        yield cpu_zygote is not None
