"""Gate 4's first round prestarted during gates 1-3 (``GateSettings.prestart_timing``).

The real cascade on the CPU (sandboxed children forked from the session's
zygote) gives the same verdicts with and without the prestarted child, for an
honest kernel, cheats caught in timing and in gate 2, and a crash; the
protocol itself -- a forged go ignored, stop honoured, a changed file
discarding the child -- runs against a scripted child.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import pytest

import gates.prestart as prestart
from gates import job_progress
from gates.cascade import verify_candidate
from gates.go_signal import SIGNAL_FILE, GoSignal, Stopped, wait_for_go
from gates.job_progress import record_to
from gates.protocol import ModelSource, TimingJob
from gates.reference import prepare_reference
from gates.runner import ChildOutcome
from kernelopt.contracts.verdicts import GateStatus
from tests.support.adversarial import cpu_suite_settings

ROOT = Path(__file__).resolve().parents[2]
PROBLEM = ROOT / "tests" / "problems" / "gates" / "swish_bias.py"
CANDIDATES = ROOT / "tests" / "fixtures" / "candidates" / "gates"
# honest; caught while timed; caught by gate 2 (the prestarted child must stop); a crash
CASES = ("swish_fused", "late_cheat", "partial_write", "segfault")


def _summary(result: Any) -> list[tuple[str, str]]:
    return [(v.gate.value, v.status.value) for v in result.verdicts]


@pytest.fixture(scope="module")
def verdicts(cpu_zygote: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    from gates.runner import forking_from

    base = cpu_suite_settings()
    out: dict[str, Any] = {}
    with forking_from("cpu", cpu_zygote):
        tmp = tmp_path_factory.mktemp("prestart")
        bundle = prepare_reference(PROBLEM, base, tmp / "reference")
        for on in (False, True):
            settings = base.model_copy(update={"prestart_timing": on})
            for name in CASES:
                workdir = tmp / f"{name}-{on}"
                result = verify_candidate(
                    PROBLEM,
                    CANDIDATES / f"{name}.py",
                    settings,
                    workdir=workdir,
                    bundle=bundle,
                    keep_files=True,
                )
                out[f"{name}-{on}"] = (result, workdir)
    return out


@pytest.mark.parametrize("name", CASES)
def test_prestarted_timing_gives_the_same_verdicts(verdicts: dict[str, Any], name: str) -> None:
    plain, _ = verdicts[f"{name}-False"]
    ahead, _ = verdicts[f"{name}-True"]
    assert _summary(ahead) == _summary(plain)
    assert ahead.accepted == plain.accepted
    assert ahead.deciding_gate == plain.deciding_gate


def test_the_honest_kernel_is_timed_by_the_prestarted_child(verdicts: dict[str, Any]) -> None:
    result, _ = verdicts["swish_fused-True"]
    stages = result.environment["stage_seconds"]
    assert result.accepted, result.reason
    assert stages.get("timing_prestarted") == 1.0, (
        result.environment.get("gate_4"),
        sorted(stages),
    )
    assert "baseline.wait_go" in stages  # it waited for gates 1-3 after its build
    assert "timing_prestarted" not in verdicts["swish_fused-False"][0].environment["stage_seconds"]


def test_a_cheat_caught_while_timed_is_caught_in_the_prestarted_child(
    verdicts: dict[str, Any],
) -> None:
    result, _ = verdicts["late_cheat-True"]
    failing = next(v for v in result.verdicts if not v.passed)
    assert failing.gate.value == "performance" and "timed call #" in failing.reason
    assert result.environment["stage_seconds"].get("timing_prestarted") == 1.0


@pytest.mark.parametrize("name", ["partial_write", "segfault"])
def test_a_candidate_rejected_by_gates_1_3_is_never_timed(
    verdicts: dict[str, Any], name: str
) -> None:
    result, workdir = verdicts[f"{name}-True"]
    assert not result.accepted
    assert result.verdicts[-1].status in (GateStatus.FAIL, GateStatus.ERROR)
    rounds = list(workdir.glob("candidate-*/timing/round0"))
    assert len(rounds) == 1  # it was started ...
    marks = [
        json.loads(x)["phase"] for x in (rounds[0] / "progress.jsonl").read_text().splitlines()
    ]
    assert "base_wait_go" in marks  # ... built the baseline, waited ...
    after = marks[marks.index("base_wait_go") + 1 :]
    assert not after  # ... and was stopped: no input, no call, no candidate
    assert "Stopped" in (rounds[0] / "result.json").read_text()
    assert not (rounds[0] / "checks.pt").exists()


# --------------------------------------------------------------------------- the protocol


@pytest.fixture(autouse=True)
def _own_progress_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """The scripted children record marks in this process: put its marks back after."""
    monkeypatch.setattr(job_progress, "_progress_path", job_progress._progress_path)


def test_a_go_without_the_parents_nonce_is_ignored(tmp_path: Path) -> None:
    record_to(tmp_path)
    signal = GoSignal()
    (tmp_path / SIGNAL_FILE).write_text("go " + "0" * 64)  # what a neighbour could write
    with pytest.raises(Stopped, match="no go within"):
        wait_for_go(signal.digest, 0.2)
    forged = threading.Timer(0.05, lambda: (tmp_path / SIGNAL_FILE).write_text("go guess"))
    real = threading.Timer(0.2, lambda: signal.send(tmp_path, go=True))
    forged.start()
    real.start()
    started = time.monotonic()
    wait_for_go(signal.digest, 5.0)
    assert time.monotonic() - started >= 0.15  # the forged go did not release it
    other = GoSignal()
    other.send(tmp_path, go=False)
    with pytest.raises(Stopped, match="did not pass"):
        wait_for_go(other.digest, 1.0)


class _ScriptedChild:
    """Stands in for run_job: marks it started, then waits for go or stop as the real
    timing child does, and reports which it got."""

    def __init__(self) -> None:
        self.got = ""

    def __call__(self, job: TimingJob, workdir: Path, **_: Any) -> ChildOutcome:
        workdir.mkdir(parents=True, exist_ok=True)
        record_to(workdir)
        (workdir / "progress.jsonl").write_text('{"phase": "load_job", "t": 0}\n')
        try:
            wait_for_go(job.go_digest, job.go_timeout_s)
            self.got = "go"
        except Stopped as exc:
            self.got = str(exc)
        return ChildOutcome("ok", "done", 0.1)


def _round(tmp_path: Path, child: _ScriptedChild, watched: list[Path]) -> Any:
    job = TimingJob(
        side="candidate",
        model=ModelSource(kind="candidate", problem_path="p.py", candidate_path="c.py"),
        baseline=ModelSource(kind="eager", problem_path="p.py"),
        device="cpu",
        inputs_dir=str(tmp_path),
        input_set="seed0",
    )
    return prestart.PrestartedRound(
        job, tmp_path / "round0", timeout_s=5.0, wait_s=5.0, device="cpu", watched=watched
    )


def test_go_and_stop_reach_the_waiting_child(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    child = _ScriptedChild()
    monkeypatch.setattr(prestart, "run_job", child)
    assert _round(tmp_path / "a", child, []).go() is not None and child.got == "go"
    child = _ScriptedChild()
    monkeypatch.setattr(prestart, "run_job", child)
    _round(tmp_path / "b", child, []).stop()
    assert "did not pass" in child.got


@pytest.mark.parametrize("how", ["rewritten", "removed"])
def test_a_file_changed_during_the_overlap_discards_the_prestarted_child(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    cache = tmp_path / "cache"
    cache.mkdir()
    kernel = cache / "kernel.cubin"
    kernel.write_bytes(b"honest")
    (cache / "other").write_bytes(b"x")
    child = _ScriptedChild()
    monkeypatch.setattr(prestart, "run_job", child)
    ahead = _round(tmp_path, child, [cache])
    # the candidate child, beside it: poisons a kernel and puts it back, or removes it
    if how == "rewritten":
        kernel.write_bytes(b"slow!!")
        kernel.write_bytes(b"honest")
    else:
        kernel.unlink()
    (cache / "new_kernel").write_bytes(b"its own")  # new files alone would be benign
    assert ahead.go() is None  # discarded: the round runs in a fresh child
    assert "did not pass" in child.got


def test_a_child_that_ended_before_its_go_is_replaced_by_a_fresh_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Killed by a sibling (same sandbox, same uid) or crashed building the baseline: the
    round runs in a fresh child instead of failing as the baseline's infrastructure error."""

    def killed(job: TimingJob, workdir: Path, **_: Any) -> ChildOutcome:
        workdir.mkdir(parents=True, exist_ok=True)
        (workdir / "progress.jsonl").write_text('{"phase": "load_job", "t": 0}\n')
        return ChildOutcome("crashed", "base_wait_go", 0.1)

    monkeypatch.setattr(prestart, "run_job", killed)
    ahead = _round(tmp_path, _ScriptedChild(), [])
    deadline = time.monotonic() + 5
    while not ahead._future.done() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert ahead.go() is None
