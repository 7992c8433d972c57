"""Fixtures shared by the end-to-end GPU tests: where their records go, and the store.

On the GPU host (``source scripts/device_env.sh``) ``$OUT`` is the folder that comes
back from the device, so the tables and exports these tests write land there;
elsewhere they go to a temporary folder.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from kernelopt.config import Settings
from kernelopt.store import ArtifactStore, open_store

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def gpu_out(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``$OUT/e2e`` on the device host, a temporary folder elsewhere."""
    out = os.environ.get("OUT")
    path = Path(out) / "e2e" if out else tmp_path_factory.mktemp("gpu-e2e-out")
    path.mkdir(parents=True, exist_ok=True)
    return path


@pytest.fixture(scope="session")
def gpu_settings(tmp_path_factory: pytest.TempPathFactory) -> Settings:
    """Settings of ``$KERNELOPT_HOME`` (one is made when unset): the store and the workers
    these tests start must agree on it, and the gate children read it from the env."""
    os.environ.setdefault("KERNELOPT_HOME", str(tmp_path_factory.mktemp("kernelopt-home")))
    return Settings.from_env()


@pytest.fixture(scope="session")
def gpu_store(gpu_settings: Settings) -> ArtifactStore:
    return open_store(gpu_settings.artifacts_dir)


@pytest.fixture(scope="session")
def record(gpu_out: Path) -> Callable[..., None]:
    """Append one JSON row to ``gpu_out/<table>.jsonl``: the numbers a run measured stay
    readable even when a later test fails or the device call is cut."""

    def write(table: str, **fields: Any) -> None:
        with open(gpu_out / f"{table}.jsonl", "a", encoding="utf-8") as handle:
            handle.write(json.dumps(fields, default=str) + "\n")

    return write
