"""Gate-test fixtures: small problem sizes for the CPU, a private KERNELOPT_HOME, a zygote."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from gates.runner import fast_launch


@pytest.fixture(scope="session")
def gates_env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Children inherit this environment: small problem sizes (CPU), a scratch home."""
    home = tmp_path_factory.mktemp("gates-home")
    saved = {k: os.environ.get(k) for k in ("KERNELOPT_GATES_SMALL", "KERNELOPT_HOME")}
    os.environ["KERNELOPT_GATES_SMALL"] = "1"
    os.environ["KERNELOPT_HOME"] = str(home)
    yield home
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


@pytest.fixture(scope="session")
def cpu_launcher(gates_env: Path) -> Iterator[bool]:
    """A CPU zygote for the whole session (children still start fresh per job)."""
    with fast_launch("cpu") as started:
        yield started
