"""On a GPU worker the built-in proposer runs in a supervised child under the GPU's shared
lease (two slots' proposals side by side, a CUDA fault kills only the child); without a
GPU it runs in the worker's thread, with the same answer."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from temporalio.testing import ActivityEnvironment

import activities.search_activities as search_activities
from kernelopt.store import open_store
from tests.kernelopt.proposer.test_builtin import _inp
from tests.support.inductor_samples import POINTWISE
from tests.support.paths import ROOT


async def test_on_a_gpu_worker_the_proposer_runs_in_a_child_under_the_shared_lease(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KERNELOPT_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("PYTHONPATH", str(ROOT))  # the child imports the probe
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.setattr(search_activities, "PROPOSER", "tests.support.proposer_probe:propose")
    inp = _inp(open_store(), POINTWISE, count=3)
    env = ActivityEnvironment()

    in_thread = await env.run(search_activities.propose_builtin_on_gpu, inp)
    assert in_thread.variants and in_thread.device_seconds is not None

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")  # as a GPU worker pins itself
    in_child = await env.run(search_activities.propose_builtin_on_gpu, inp)
    assert [v.label for v in in_child.variants] == [v.label for v in in_thread.variants]
    assert [v.source for v in in_child.variants] == [v.source for v in in_thread.variants]
    pid, lease = dict(part.split("=") for part in in_child.note.split()).values()
    assert int(pid) != os.getpid() and lease == "shared"
    assert in_child.device_seconds is not None and in_child.device_seconds > 0
