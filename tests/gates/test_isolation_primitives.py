"""Poisoned allocations, tamper-proof timers and the child runner, in isolation."""

from __future__ import annotations

import time
from pathlib import Path

import torch

from gates.poison import PoisonAllocations, poison_
from gates.protocol import CandidateJob, InputSet, ModelSource
from gates.runner import fast_launch, run_job
from gates.timers import TimerKit


def test_poison_mode_fills_every_empty_allocation() -> None:
    with PoisonAllocations() as mode:
        a = torch.empty(5)
        b = torch.empty_like(a)
        c = a.new_empty(3)
        d = torch.empty_strided((2, 2), (1, 2))
        e = torch.empty(4, dtype=torch.int32)
    assert all(torch.isnan(t).all() for t in (a, b, c, d))
    assert (e == -1).all()
    assert mode.count >= 5


def test_poison_does_not_touch_explicit_initialisation() -> None:
    with PoisonAllocations():
        z = torch.zeros(4)
        o = torch.ones(4)
    assert (z == 0).all() and (o == 1).all()


def test_poison_bytes_are_nan_for_half_and_double() -> None:
    for dtype in (torch.float16, torch.bfloat16, torch.float64):
        t = torch.zeros(8, dtype=dtype)
        poison_(t)
        assert torch.isnan(t).all()


def test_timer_kit_detects_and_restores_patches() -> None:
    kit = TimerKit("cpu")
    original = time.perf_counter
    try:
        time.perf_counter = lambda: 0.0  # type: ignore[assignment]
        assert "time.perf_counter" in kit.tampered()
        kit.restore()
        assert time.perf_counter is original
        assert kit.tampered() == []
    finally:
        time.perf_counter = original  # type: ignore[assignment]


def test_host_timer_measures_real_work() -> None:
    kit = TimerKit("cpu")
    ms = kit.host_batch_ms(lambda: time.sleep(0.002), calls=5)
    assert 1.5 < ms < 50
    assert kit.calls_for(2.0, 20.0) == 10


CANDIDATES = Path(__file__).parent / "candidates"


def _job(tmp: Path, candidate: str) -> CandidateJob:
    problem = Path(__file__).parent / "problems" / "swish_bias.py"
    return CandidateJob(
        model=ModelSource(
            kind="candidate", problem_path=str(problem), candidate_path=str(CANDIDATES / candidate)
        ),
        device="cpu",
        input_sets=[InputSet(name="seed0", seed=0)],
        inputs_dir=str(tmp),
        out_dir=str(tmp),
    )


def _outcomes(tmp: Path) -> dict[str, object]:
    torch.save([torch.randn(8, 64)], tmp / "seed0.pt")
    return {
        name: run_job(_job(tmp, f"{name}.py"), tmp / name, timeout_s=timeout, device="cpu")
        for name, timeout in (("swish_fused", 60), ("raises", 60), ("segfault", 60), ("hang", 3))
    }


def _check(out: dict) -> None:
    assert out["swish_fused"].ok and out["swish_fused"].phase == "done"
    raised = out["raises"]
    assert raised.status == "exception" and raised.phase == "dry_run"
    assert raised.error_type == "TypeError" and "Traceback" in raised.traceback
    crashed = out["segfault"]
    assert crashed.status == "crashed" and crashed.returncode == -11
    assert "SIGSEGV" in crashed.describe() and "dry_run" in crashed.describe()
    hung = out["hang"]
    assert hung.status == "timeout" and hung.phase == "dry_run"


def test_runner_spawned_children(tmp_path: Path, gates_env: Path) -> None:
    _check(_outcomes(tmp_path))


def test_runner_zygote_children(tmp_path: Path, gates_env: Path) -> None:
    with fast_launch("cpu") as started:
        assert started
        _check(_outcomes(tmp_path))
