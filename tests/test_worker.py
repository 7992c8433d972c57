"""worker.py's GPU worker parts, as production and the fault tests' real GPU worker build them."""

from __future__ import annotations

from pathlib import Path

import pytest
from temporalio import activity
from temporalio.client import Client
from temporalio.worker import Worker

import worker
from activities import spare_child
from gates.reference_cache import REFERENCE_CACHE_ENV
from kernelopt.config import Settings


@activity.defn(name="probe")
async def probe(inp: Settings) -> Settings:  # registered, never run
    return inp


async def test_a_prepared_gpu_worker_gets_its_reference_folder_worker_and_spares(
    client: Client, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    monkeypatch.setenv(REFERENCE_CACHE_ENV, "")  # restored after the test
    monkeypatch.setattr(worker.socket, "gethostname", lambda: "node-1")
    stale = tmp_path / "references" / "node-1-gpu0" / "left-by-a-killed-worker"
    stale.mkdir(parents=True)
    settings = Settings(home=tmp_path, zygote=False, spare_child=True)
    try:
        built, zygote = await worker.start_gpu_worker(
            client, settings, 0, "gpu-test", activities=[probe]
        )
        assert isinstance(built, Worker) and zygote is None  # KERNELOPT_ZYGOTE=0: jobs spawn
        assert stale.parent.is_dir() and not stale.exists()  # an emptied folder of its own
        assert spare_child._enabled
    finally:
        spare_child.disable()
