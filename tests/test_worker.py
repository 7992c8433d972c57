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


def test_gpu_slots_come_from_the_flag_or_the_environment(
    client: Client, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One activity at a time unless asked; more overlap untimed work (gates/gpu_lease.py)."""
    parser = worker.argparse.ArgumentParser()
    worker.add_arguments(parser)
    assert worker.settings_from_args(parser.parse_args([])).gpu_slots == 1
    monkeypatch.setenv("KERNELOPT_GPU_SLOTS", "3")
    assert worker.settings_from_args(parser.parse_args([])).gpu_slots == 3
    assert worker.settings_from_args(parser.parse_args(["--gpu-slots", "2"])).gpu_slots == 2
    two = worker.build_gpu_worker(client, "gpu-slots-2", activities=[probe], slots=2)
    assert two.config()["max_concurrent_activities"] == 2
    one = worker.build_gpu_worker(client, "gpu-slots-1", activities=[probe])
    assert one.config()["max_concurrent_activities"] == 1
