"""Poisoned allocations, tamper-proof timers and the child runner, in isolation."""

from __future__ import annotations

import json
import signal
import socket
import time
from pathlib import Path

import pytest
import torch

from gates.poison import PoisonAllocations, poison_
from gates.protocol import CandidateJob, InputSet, ModelSource
from gates.runner import child_env, fast_launch, run_job
from gates.timers import TimerKit
from gates.zygote_service import DEVICE_ENV, SOCKET_ENV, ZygoteService
from tests.support.processes import descendants, live_parents


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


def test_timer_kit_sees_backend_switches_set_behind_the_python_properties() -> None:
    """Set through torch._C directly, or mixing the new and legacy precision APIs."""
    from kernelopt.precision import strict_fp32

    before = TimerKit("cpu")  # this process's switches, put back at the end
    strict_fp32()
    kit = TimerKit("cpu")
    try:
        torch._C._set_cudnn_benchmark(True)
        torch.backends.cudnn.conv.fp32_precision = "tf32"  # new API: legacy getter now raises
        torch.set_float32_matmul_precision("medium")
        changed = kit.tampered()
        for label in (
            "torch.backends.cudnn.benchmark",
            "torch.backends.cudnn.allow_tf32",
            "torch.float32_matmul_precision",
        ):
            assert label in changed, (label, changed)
        kit.restore()
        assert kit.tampered() == []
        assert torch._C._get_cudnn_benchmark() is False
    finally:
        before.restore()


def test_host_timer_measures_real_work() -> None:
    kit = TimerKit("cpu")
    ms = kit.host_batch_ms(lambda: time.sleep(0.002), calls=5)
    assert 1.5 < ms < 50
    assert kit.calls_for(2.0, 20.0) == 10


CANDIDATES = Path(__file__).parents[1] / "fixtures" / "candidates" / "gates"


def _job(tmp: Path, candidate: str) -> CandidateJob:
    problem = Path(__file__).parents[1] / "problems" / "gates" / "swish_bias.py"
    return CandidateJob(
        model=ModelSource(
            kind="candidate", problem_path=str(problem), candidate_path=str(CANDIDATES / candidate)
        ),
        device="cpu",
        input_sets=[InputSet(name="seed0", seed=0)],
        inputs_dir=str(tmp),
        out_dir=str(tmp),
    )


def _outcomes(tmp: Path, hang_s: float = 3.0) -> dict[str, object]:
    """``hang_s`` must outlast the child's start: a spawned one imports torch (seconds, more
    on a loaded machine) before it reaches the hanging call."""
    torch.save([torch.randn(8, 64)], tmp / "seed0.pt")
    return {
        name: run_job(_job(tmp, f"{name}.py"), tmp / name, timeout_s=timeout, device="cpu")
        for name, timeout in (
            ("swish_fused", 60),
            ("raises", 60),
            ("segfault", 60),
            ("hang", hang_s),
        )
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


@pytest.mark.slow  # ~24 s of waiting; the spawned path's hang: the stall test below
def test_runner_spawned_children(tmp_path: Path, gates_env: Path) -> None:
    # ~6 times a spawned child's start here: under a loaded runner 8 s was once too short
    _check(_outcomes(tmp_path, hang_s=15.0))


def test_runner_zygote_children(tmp_path: Path, gates_env: Path) -> None:
    with fast_launch("cpu") as started:
        assert started
        _check(_outcomes(tmp_path))


def _shared_zygote(monkeypatch: pytest.MonkeyPatch, tmp: Path) -> ZygoteService:
    service = ZygoteService("cpu", str(tmp / "z.sock"))
    service.start()
    monkeypatch.setenv(SOCKET_ENV, service.path)
    monkeypatch.setenv(DEVICE_ENV, "cpu")
    return service


def test_runner_children_fork_from_the_workers_shared_zygote(
    tmp_path: Path, gates_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    service = _shared_zygote(monkeypatch, tmp_path)
    try:
        probed = service.jobs
        _check(_outcomes(tmp_path))
        assert service.jobs == probed + 4
        assert not any(k.startswith("KERNELOPT_ZYGOTE") for k in child_env("cpu"))
    finally:
        service.close()
    assert not Path(service.path).exists()


def test_shared_zygote_kills_the_job_of_a_client_that_left(
    tmp_path: Path, gates_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    service = _shared_zygote(monkeypatch, tmp_path)
    try:
        torch.save([torch.randn(8, 64)], tmp_path / "seed0.pt")
        workdir = tmp_path / "hang"
        workdir.mkdir()
        (workdir / "job.json").write_text(_job(tmp_path, "hang.py").model_dump_json())
        started = service.jobs
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.connect(service.path)
            sock.sendall((json.dumps({"workdir": str(workdir), "timeout_s": 600}) + "\n").encode())
            # the job has started (a sandboxed zygote stages its files elsewhere, so the
            # host workdir shows no progress until the job ends)
            deadline = time.monotonic() + 60
            while service.jobs == started and time.monotonic() < deadline:
                time.sleep(0.2)
            assert service.jobs == started + 1
        deadline = time.monotonic() + 30
        while service.abandoned == 0 and time.monotonic() < deadline:
            time.sleep(0.2)
        assert service.abandoned == 1
    finally:
        service.close()


def test_runner_spawns_when_the_shared_zygote_is_gone(
    tmp_path: Path, gates_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(SOCKET_ENV, str(tmp_path / "nobody.sock"))
    monkeypatch.setenv(DEVICE_ENV, "cpu")
    torch.save([torch.randn(8, 64)], tmp_path / "seed0.pt")
    out = run_job(_job(tmp_path, "swish_fused.py"), tmp_path / "j", timeout_s=60, device="cpu")
    assert out.ok and out.phase == "done"


def _descendants(pid: int) -> set[int]:
    """Live (non-zombie) host processes below ``pid``: the zygote's tree, sandbox or not."""
    return descendants(live_parents(), {pid})


def test_a_daemon_left_behind_by_a_job_is_killed_with_it(tmp_path: Path, gates_env: Path) -> None:
    """A setsid'd grandchild escapes the job's process group, not the zygote's sweep.

    PIDs are counted on the host below the zygote (inside its sandbox the daemon's
    own PID means nothing out here): the job must leave the tree as it found it.
    """
    from gates.runner import _ZYGOTES

    torch.save([torch.randn(8, 64)], tmp_path / "seed0.pt")
    with fast_launch("cpu") as started:
        assert started
        root = _ZYGOTES["cpu"]._proc.pid
        before = _descendants(root)
        out = run_job(
            _job(tmp_path, "daemon_escape.py"), tmp_path / "d", timeout_s=60, device="cpu"
        )
        assert out.ok
        assert (tmp_path / "d" / "daemon.pid").is_file()  # the daemon did start
        deadline = time.monotonic() + 10
        while _descendants(root) != before and time.monotonic() < deadline:
            time.sleep(0.1)
        assert _descendants(root) == before


def _stalled(tmp: Path, name: str, stall_s: float) -> None:
    """The hanging candidate, given all the time in the world but ``stall_s`` between marks."""
    out = run_job(_job(tmp, "hang.py"), tmp / name, timeout_s=600, device="cpu", stall_s=stall_s)
    assert out.status == "timeout" and out.stalled and out.phase == "dry_run", out.describe()
    assert f"no progress within {stall_s:g} s" in out.describe()
    assert out.wall_s < stall_s + 60


def test_a_job_that_stops_marking_progress_is_killed_after_stall_s(
    tmp_path: Path, gates_env: Path
) -> None:
    """Spawned and forked from this process's zygote, whose sandbox stages the child's
    progress file elsewhere (the worker's shared zygote: tests/gates/test_screening.py)."""
    torch.save([torch.randn(8, 64)], tmp_path / "seed0.pt")
    _stalled(tmp_path, "spawned", 12.0)  # longer than a spawned child's torch import
    with fast_launch("cpu") as started:
        assert started
        _stalled(tmp_path, "forked", 4.0)


def test_a_child_that_mixed_devices_is_told_how_that_usually_happens() -> None:
    """torch's device-mismatch error names the devices, not the cause: the one-line
    description adds it (a tensor made inside forward without ``device=``)."""
    from gates.runner import ChildOutcome

    mixed = ChildOutcome(
        status="exception",
        phase="reference",
        wall_s=0.5,
        error_type="RuntimeError",
        message="Expected all tensors to be on the same device, but found at least two "
        "devices, cuda:0 and cpu!\nmore",
    )
    assert "device=x.device" in mixed.describe() and "\n" not in mixed.describe()
    other = ChildOutcome(
        status="exception", phase="reference", wall_s=0.5, error_type="TypeError", message="bad"
    )
    assert other.describe() == "TypeError during reference: bad"


@pytest.mark.parametrize(
    ("returncode", "words"),
    [
        (0, "never call exit()"),
        (3, "never call exit()"),
        (-signal.SIGSEGV, "illegal memory access"),
        (-signal.SIGKILL, "ran out of memory"),
    ],
)
def test_a_dead_child_is_told_what_its_kind_of_death_usually_means(
    returncode: int, words: str
) -> None:
    from gates.feedback import crash_feedback
    from gates.runner import ChildOutcome

    dead = ChildOutcome(status="crashed", phase="dry_run", wall_s=1.0, returncode=returncode)
    text = crash_feedback(dead)
    assert words in text, text
