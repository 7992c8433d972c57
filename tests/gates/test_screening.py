"""The screening tier on the CPU: one screen job through the gate runner, real candidates.

The honest fused kernel gets an estimate; a wrong one, one that raises, one
that segfaults the child and one that hangs it get none, each with its reason,
and the crash or hang costs only its own estimate (a fresh child screens the
rest).  Spawned (a fresh sandboxed interpreter) and forked from the worker's
zygote, as gate jobs are.  The estimate is its own model: nothing typed as a
verdict accepts it.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from pydantic import ValidationError
from temporalio.testing import ActivityEnvironment

from activities.screen import screen_candidates as screen_activity
from gates.campaign import gate_candidate
from gates.screening import screen_candidates
from gates.zygote_service import DEVICE_ENV, SOCKET_ENV, ZygoteService
from kernelopt.contracts.screening import (
    ScreenCandidate,
    ScreeningEstimate,
    ScreenInput,
    ScreenParams,
)
from kernelopt.contracts.search import Candidate, Decision
from kernelopt.contracts.verdicts import GateName, GateStatus, GateVerdict
from kernelopt.store import ArtifactStore, open_store
from tests.gates.test_campaign_cpu import _forward_input
from tests.support.candidate_sources import SWISH_MODEL

GATES = Path(__file__).resolve().parent
WRONG = """
import torch
import torch.nn as nn

""" + SWISH_MODEL.replace(
    "x * torch.sigmoid(x) * self.scale + self.bias",
    "x * self.scale + self.bias  # forgot the sigmoid",
)


STICKY = """
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, d, scale):
        super().__init__()

    def forward(self, x):
        raise RuntimeError("CUDA error: an illegal memory access was encountered")
"""


# the do-nothing model each hostile candidate below ends with: its harm is at import
IDENTITY = """
class ModelNew(nn.Module):
    def __init__(self, d, scale):
        super().__init__()

    def forward(self, x):
        return x
"""

VANDAL = (
    """
import contextlib
from pathlib import Path

import torch.nn as nn

with contextlib.suppress(OSError):  # the sandbox makes this read-only
    for other in Path(__file__).parent.glob("cand_*.py"):
        if other.resolve() != Path(__file__).resolve():
            other.write_text("raise SystemExit('vandalised')\\n")

"""
    + IDENTITY
)


# Hostile to the candidates screened after it, each in one way the child or its parent sees.
PATCHER = (
    """
import torch
import torch.nn as nn

torch.sigmoid = lambda x: torch.zeros_like(x)  # every later swish is now wrong

"""
    + SWISH_MODEL
)

SPINNER = (
    """
import threading
import time

import torch.nn as nn


def _spin():
    while True:  # steals the CPU from every later timing in this process
        time.time()


threading.Thread(target=_spin, daemon=True).start()

"""
    + IDENTITY
)

FORGER = (
    """
import json
from pathlib import Path

import torch.nn as nn

# every later candidate "screened" as correct and a thousand times slower than the baseline
with open(Path.cwd() / "results.jsonl", "a") as out:
    for cid in ("fused", "fused_again"):
        out.write(json.dumps({"candidate_id": cid, "ok": True, "ms": 1e6}) + "\\n")

"""
    + IDENTITY
)


@pytest.fixture
def store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> ArtifactStore:
    monkeypatch.setenv("KERNELOPT_GATES_SMALL", "1")  # the interpreter needs small sizes
    monkeypatch.setenv("KERNELOPT_HOME", str(tmp_path / "home"))
    return open_store(tmp_path / "home" / "artifacts")  # the one a supervised child opens


def _candidate(store: ArtifactStore, cid: str, text: str) -> ScreenCandidate:
    return ScreenCandidate(candidate_id=cid, source=store.put_text(text, name=f"{cid}.py"))


def _input(
    store: ArtifactStore, cands: list[ScreenCandidate], params: ScreenParams | None = None
) -> ScreenInput:
    base = _forward_input(store, "swish_fused")
    return ScreenInput(
        compiled=base.compiled,
        segment=base.segment,
        target=base.target,
        candidates=cands,
        device="cpu",
        baseline="eager",
        params=params or ScreenParams(),
    )


def _read(name: str) -> str:
    return (GATES.parent / "fixtures" / "candidates" / "gates" / f"{name}.py").read_text()


def test_a_round_is_screened_in_one_child_and_a_crash_costs_only_its_candidate(
    store: ArtifactStore,
) -> None:
    cands = [
        _candidate(store, "fused", _read("swish_fused")),
        _candidate(store, "wrong", WRONG),
        _candidate(store, "segv", _read("segfault")),
        _candidate(store, "raises", _read("raises")),
        _candidate(store, "sticky", STICKY),
        _candidate(store, "fused_again", _read("swish_fused") + "\n# same kernel\n"),
    ]
    result = screen_candidates(_input(store, cands), store)
    by_id = {e.candidate_id: e for e in result.estimates}
    assert [e.candidate_id for e in result.estimates] == [c.candidate_id for c in cands]
    # the segfault ended the first child; a CUDA error (sticky) ends the second after its line
    assert result.child_starts == 3
    for cid in ("fused", "fused_again"):
        e = by_id[cid]
        assert e.smoke_ok and e.untrusted, e
        assert e.estimated_ms and e.estimated_ms > 0 and e.baseline_ms and e.baseline_ms > 0
        assert e.estimated_speedup == pytest.approx(e.baseline_ms / e.estimated_ms)
        assert 0 < e.seconds < 10
    assert not by_id["wrong"].smoke_ok and "max abs error" in by_id["wrong"].smoke_note
    assert by_id["wrong"].estimated_speedup is None
    assert "died on it" in by_id["segv"].smoke_note and by_id["segv"].estimated_ms is None
    assert not by_id["raises"].smoke_ok and "raised" in by_id["raises"].smoke_note
    assert not by_id["sticky"].smoke_ok and "illegal memory access" in by_id["sticky"].smoke_note


async def test_the_activity_screens_in_a_supervised_child_and_reports_its_run_time(
    store: ArtifactStore,
) -> None:
    cands = [
        _candidate(store, "fused", _read("swish_fused")),
        _candidate(store, "wrong", WRONG),
    ]
    started = time.perf_counter()
    result = await ActivityEnvironment().run(screen_activity, _input(store, cands))
    wall = time.perf_counter() - started
    assert [(e.candidate_id, e.smoke_ok) for e in result.estimates] == [
        ("fused", True),
        ("wrong", False),
    ]
    assert result.child_starts == 1
    # set by the activity wrapper (the GPU it held), never by the child the candidates ran in
    assert result.device_seconds is not None and 0 < result.device_seconds <= wall


def test_a_candidate_cannot_rewrite_the_sources_screened_after_it(store: ArtifactStore) -> None:
    cands = [
        _candidate(store, "vandal", VANDAL),
        _candidate(store, "fused", _read("swish_fused")),
    ]
    result = screen_candidates(_input(store, cands), store)
    vandal, fused = result.estimates
    assert not vandal.smoke_ok and "max abs error" in vandal.smoke_note
    assert fused.smoke_ok and fused.estimated_speedup, fused


def test_an_estimate_is_never_accepted_as_a_verdict(store: ArtifactStore) -> None:
    estimate = ScreeningEstimate(candidate_id="c", smoke_ok=True, estimated_speedup=9.0)
    with pytest.raises(ValidationError):
        GateVerdict.model_validate(estimate.model_dump())
    cand = Candidate(id="c", target_id="t", parent_id=None, iteration=0, source=None, proposer="t")
    with pytest.raises(ValidationError):
        Decision(candidate=cand, accepted=False, reason="x", verdicts=[estimate])
    verdict = GateVerdict(gate=GateName.PERFORMANCE, status=GateStatus.PASS, reason="1.5x")
    with pytest.raises(ValidationError):  # and a verdict is not an estimate either
        ScreeningEstimate.model_validate(verdict.model_dump())


@pytest.mark.slow
def test_screening_costs_a_fraction_of_gate_candidate(store: ArtifactStore) -> None:
    """CPU numbers for the report: per-candidate screening seconds vs one gate_candidate."""
    cands = [_candidate(store, f"c{i}", _read("swish_fused") + f"\n# {i}\n") for i in range(4)]
    started = time.perf_counter()
    result = screen_candidates(_input(store, cands), store)
    screen_wall = time.perf_counter() - started
    started = time.perf_counter()
    gated = gate_candidate(_forward_input(store, "swish_fused"), store)
    gate_wall = time.perf_counter() - started
    assert gated.passed and all(e.smoke_ok for e in result.estimates)
    per_candidate = max(e.seconds for e in result.estimates)
    print(
        f"\nscreening: {screen_wall:.2f} s for {len(cands)} candidates (one child), "
        f"max {per_candidate:.3f} s per candidate; gate_candidate: {gate_wall:.2f} s"
    )
    assert per_candidate < 1.0 and screen_wall < gate_wall


@pytest.mark.parametrize("hostile", [PATCHER, SPINNER], ids=["patches-torch", "spins-a-thread"])
def test_candidates_screened_after_a_suspect_are_screened_again_in_a_fresh_child(
    store: ArtifactStore, hostile: str
) -> None:
    cands = [
        _candidate(store, "before", _read("swish_fused") + "\n# before\n"),
        _candidate(store, "hostile", hostile),
        _candidate(store, "fused", _read("swish_fused")),
    ]
    result = screen_candidates(_input(store, cands), store)
    before, hostile_est, fused = result.estimates
    assert "may disturb others" in hostile_est.smoke_note
    # only the candidate screened after it in the same child is measured again, without it
    assert result.rescreened == ["fused"] and result.child_starts == 2
    assert fused.smoke_ok and fused.estimated_speedup, fused
    assert before.smoke_ok and before.estimated_speedup, before


def test_forged_lines_send_every_candidate_to_a_child_of_its_own(store: ArtifactStore) -> None:
    cands = [
        _candidate(store, "forger", FORGER),
        _candidate(store, "fused", _read("swish_fused")),
        _candidate(store, "fused_again", _read("swish_fused") + "\n# again\n"),
    ]
    result = screen_candidates(_input(store, cands), store)
    assert result.rescreened == ["forger", "fused", "fused_again"]
    assert result.child_starts == 1 + len(cands)
    for e in result.estimates[1:]:
        assert e.smoke_ok and e.estimated_ms and e.estimated_ms < 1e6, e


def test_an_honest_round_is_screened_once(store: ArtifactStore) -> None:
    cands = [_candidate(store, f"c{i}", _read("swish_fused") + f"\n# {i}\n") for i in range(2)]
    result = screen_candidates(_input(store, cands), store)
    assert result.rescreened == [] and result.child_starts == 1
    assert all(e.smoke_ok and e.smoke_note == "" for e in result.estimates)


def test_a_round_forks_from_the_workers_zygote_and_a_hang_costs_only_its_candidate(
    store: ArtifactStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The GPU worker's path: screen jobs fork from its shared zygote, staged into its
    sandbox like gate jobs; a candidate that hangs is killed once it stops the child's
    progress for ``timeout_s``, not after the whole round's time."""
    service = ZygoteService("cpu", str(tmp_path / "z.sock"))
    service.start()
    monkeypatch.setenv(SOCKET_ENV, service.path)
    monkeypatch.setenv(DEVICE_ENV, "cpu")
    try:
        probed = service.jobs
        cands = [
            _candidate(store, "fused", _read("swish_fused")),
            _candidate(store, "hang", _read("hang")),
            _candidate(store, "segv", _read("segfault")),
            _candidate(store, "fused_again", _read("swish_fused") + "\n# again\n"),
        ]
        started = time.perf_counter()
        result = screen_candidates(_input(store, cands, ScreenParams(timeout_s=10)), store)
        wall = time.perf_counter() - started
        assert service.jobs - probed == result.child_starts == 3
    finally:
        service.close()
    fused, hang, segv, again = result.estimates
    assert fused.smoke_ok and again.smoke_ok and again.estimated_speedup, result
    assert "died on it: stalled during screen hang" in hang.smoke_note
    assert "no progress within 10 s" in hang.smoke_note and hang.estimated_ms is None
    assert "died on it: process died (signal SIGSEGV) during screen segv" in segv.smoke_note
    assert wall < 10 * len(cands)  # the hang cost its own 10 s, not the round's budget


def test_a_compiler_cache_file_a_screened_candidate_rewrites_is_dropped(
    store: ArtifactStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Trusted compiles load the worker's caches later (and `state export --compiler-caches`
    carries them): a screen child gets the gate children's cache-guard window."""
    cache = tmp_path / "triton-cache"
    (cache / "ab12").mkdir(parents=True)
    victim = cache / "ab12" / "baseline_kernel.cubin"
    victim.write_bytes(b"\x7fELF baseline kernel")
    monkeypatch.setenv("TRITON_CACHE_DIR", str(cache))
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "inductor-cache"))
    poison = _read("swish_fused") + (
        f"\nfrom pathlib import Path as _P\n_v = _P({str(victim)!r})\n"
        "_v.write_bytes(_v.read_bytes() + b'\\0')\n"
        f"_P({str(cache)!r}, 'cd34').mkdir(exist_ok=True)\n"
        f"_P({str(cache)!r}, 'cd34', 'own.cubin').write_bytes(b'mine')\n"
    )
    result = screen_candidates(_input(store, [_candidate(store, "poison", poison)]), store)
    assert result.estimates[0].smoke_ok  # screening only ranks: the estimate stands
    assert not victim.exists()  # dropped: the next trusted compile builds it from source
    assert (cache / "cd34" / "own.cubin").exists()  # what a candidate compiles stays
