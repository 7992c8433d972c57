"""Two tiers in a built-in search, on the real Temporal dev server.

The workflow and the CPU activities are the real ones; gate_candidate, profile
and the screening activity are doubles on the GPU queue (the gate's numbers
follow ``builtin_ms``; the screening double reads every candidate twice as
fast as the gate will, so a screening number that leaked into a result would
show).  The history replays.
"""

from __future__ import annotations

import gzip
import io
import json
import uuid
from pathlib import Path

import pytest
from rich.console import Console
from temporalio import activity
from temporalio.client import WorkflowHistory
from temporalio.exceptions import ApplicationError

from kernelopt.audit.collect import build_report
from kernelopt.audit.html import render_html
from kernelopt.audit.model import AuditReport
from kernelopt.audit.render import print_report
from kernelopt.contracts import names
from kernelopt.contracts.audit import WorkflowRun
from kernelopt.contracts.screening import (
    SCREENED_OUT,
    ScreeningEstimate,
    ScreenInput,
    ScreenParams,
    ScreenResult,
)
from kernelopt.contracts.search import ProposerConfig, SearchParams
from kernelopt.store import open_store
from tests.workflows.test_search_kernel import Gpu, builtin_ms, run_search, search_input

OPTIMISM = 2.0  # the screening double's estimates are this much faster than the gate's


class ScreeningGpu(Gpu):
    """The GPU doubles plus a screening activity that records each round it was asked."""

    def __init__(self, broken: bool = False) -> None:
        super().__init__()
        self.rounds: list[list[str]] = []
        self.broken = broken

    def screen_activity(self):
        @activity.defn(name=names.SCREEN)
        async def screen_candidates(inp: ScreenInput) -> ScreenResult:
            self.rounds.append([c.candidate_id for c in inp.candidates])
            if self.broken:
                raise ApplicationError("screening baseline failed", non_retryable=True)
            out = []
            for c in inp.candidates:
                ms = builtin_ms(open_store().get_text(c.source)) / OPTIMISM
                out.append(
                    ScreeningEstimate(
                        candidate_id=c.candidate_id,
                        smoke_ok=True,
                        estimated_ms=ms,
                        baseline_ms=1.0,
                        estimated_speedup=1.0 / ms,
                        seconds=0.01,
                    )
                )
            return ScreenResult(estimates=out, device_seconds=0.5)

        return screen_candidates


def _input(store, screen: ScreenParams):
    return search_input(
        store,
        f"screen-{uuid.uuid4().hex[:6]}",
        params=SearchParams(iterations=2, plans=4, beam=2, screen=screen),
        use_llm=False,
        proposer=ProposerConfig(base_url="http://127.0.0.1:9/v1"),  # must never be called
    )


async def test_only_the_selected_candidates_reach_the_cascade_and_both_tiers_are_recorded(
    env, store
):
    gpu = ScreeningGpu()
    cap = 2
    result, history = await run_search(
        env, _input(store, ScreenParams(enabled=True, cap=cap, margin=0.05)), gpu
    )
    assert result.stopped_reason == "completed 2 iterations"
    assert len(gpu.rounds) == 2 and all(len(r) > cap for r in gpu.rounds)
    tried = [d for d in result.decisions if not d.retime]
    assert result.candidates_tried == len(tried) == sum(len(r) for r in gpu.rounds)
    gated = [c for c in gpu.gated if not c.endswith(":retime")]
    out = [d for d in tried if d.deciding_gate == SCREENED_OUT]
    kept = [d for d in tried if d.deciding_gate != SCREENED_OUT]
    # exactly the policy's choice went through gate_candidate, at most the cap per round
    assert sorted(gated) == sorted(d.candidate.id for d in kept)
    assert all(d.screening is not None and d.screening.selected for d in kept)
    for screened in gpu.rounds:
        assert 1 <= len([c for c in gated if c in screened]) <= cap
    # the first round: the beam had room, so the two best estimates went and the rest hit the cap
    first = [d for d in tried if d.candidate.iteration == 0]
    best_two = sorted(first, key=lambda d: d.screening.estimated_ms)[:cap]
    assert {d.candidate.id for d in best_two} == {d.candidate.id for d in first if d in kept}
    # screened-out candidates: the estimate and the reason, never a verdict or a number
    assert out
    for d in out:
        assert not d.accepted and d.verdicts == [] and d.reason.startswith("screened out")
        assert d.speedup is None and d.kernel_ms is None and d.baseline_kernel_ms is None
        assert d.screening.untrusted and not d.screening.selected and d.screening.why
        assert d.candidate.id not in gpu.gated
    # results come from the cascade only: the optimistic estimates never show
    best_ms = min(builtin_ms(store.get_text(d.candidate.source)) for d in kept if d.accepted)
    assert result.best_kernel_speedup == pytest.approx(1.0 / best_ms)
    assert all(
        d.speedup == pytest.approx(1.0 / builtin_ms(store.get_text(d.candidate.source)))
        for d in kept
        if d.accepted
    )
    # the screening activity held the GPU too: budgets charge it
    assert result.gpu_seconds >= 0.5 * len(gpu.rounds)
    # the audit shows both tiers: every candidate's estimate, the cascade's verdicts for the gated
    rows = {c.id: c for c in _audit(history).candidates}
    for d in tried:
        row = rows[d.candidate.id]
        assert row.screening == d.screening and row.verdicts == d.verdicts
        assert (row.final == "screened_out") == (d in out)
    report = _audit(history)
    html = render_html(report)
    assert html.count("screening (untrusted)") == len(tried)
    assert html.count("screened out:") == len(out)
    console = Console(record=True, width=250, file=io.StringIO())
    print_report(report, console, limit=None)
    assert console.export_text().count("screen:~") == len(tried)


def _audit(search: WorkflowHistory) -> AuditReport:
    """The search's history as a target of a recorded campaign (the audit's unit)."""
    histories = Path(__file__).resolve().parents[1] / "histories"
    index = json.loads((histories / "INDEX.json").read_text())["histories"]
    row = next(r for r in index if r["workflow_type"] == "OptimizeModel")
    text = gzip.decompress((histories / row["file"]).read_bytes()).decode()
    own = WorkflowRun(
        workflow_id=row["workflow_id"],
        run_id=row["run_id"],
        workflow_type=row["workflow_type"],
        status=row["status"],
    )
    run = WorkflowRun(
        workflow_id=search.workflow_id,
        run_id="screened",
        workflow_type="SearchKernel",
        status="completed",
    )
    return build_report(
        row["workflow_id"],
        [(own, WorkflowHistory.from_json(row["workflow_id"], text)), (run, search)],
        "test",
    )


async def test_with_screening_off_every_candidate_is_gated_and_none_screened(env, store):
    gpu = ScreeningGpu()
    result, _ = await run_search(env, _input(store, ScreenParams(enabled=False)), gpu)
    tried = [d for d in result.decisions if not d.retime]
    assert gpu.rounds == []
    assert sorted(c for c in gpu.gated if not c.endswith(":retime")) == sorted(
        d.candidate.id for d in tried
    )
    assert all(d.screening is None and d.deciding_gate != SCREENED_OUT for d in tried)


async def test_a_failed_screening_gates_every_candidate_of_its_round(env, store):
    gpu = ScreeningGpu(broken=True)
    result, _ = await run_search(env, _input(store, ScreenParams(enabled=True, cap=1)), gpu)
    assert result.stopped_reason == "completed 2 iterations"
    tried = [d for d in result.decisions if not d.retime]
    assert len(gpu.rounds) == 2
    assert sorted(c for c in gpu.gated if not c.endswith(":retime")) == sorted(
        d.candidate.id for d in tried
    )
    assert len(tried) > 2 and all(d.deciding_gate != SCREENED_OUT for d in tried)
