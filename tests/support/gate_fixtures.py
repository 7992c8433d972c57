"""Gate-test fixtures: small problem sizes for the CPU, a private KERNELOPT_HOME, a zygote."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from gates.runner import fast_launch


@pytest.fixture(scope="session")
def gates_env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Children inherit this environment: small problem sizes (CPU), a scratch home."""
    home = tmp_path_factory.mktemp("gates-home")
    with pytest.MonkeyPatch.context() as env:  # restored when the session ends
        env.setenv("KERNELOPT_GATES_SMALL", "1")
        env.setenv("KERNELOPT_HOME", str(home))
        yield home


@pytest.fixture(scope="session")
def cpu_launcher(gates_env: Path) -> Iterator[bool]:
    """A CPU zygote for the whole session (children still start fresh per job)."""
    with fast_launch("cpu") as started:
        yield started
