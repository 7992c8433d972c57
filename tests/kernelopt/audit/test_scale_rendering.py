"""The report, the audit and the progress line at hundreds of targets and thousands of candidates.

A large model's campaign searches a few hundred targets with ten candidates
each or more; the tables must stay a page long, keep what matters (winners,
what shipped) and count what they leave out, so that the counts add up.
"""

from __future__ import annotations

import io
import re

from rich.console import Console

from kernelopt.audit.model import AuditReport, CandidateAudit, TargetAudit
from kernelopt.audit.render import CANDIDATES_SHOWN, print_report
from kernelopt.campaign_status import progress_summary
from kernelopt.compile.triage import summarize
from kernelopt.contracts import (
    BudgetUse,
    CampaignPhase,
    CampaignProgress,
    Decision,
    Outcome,
    OutcomeCategory,
)
from kernelopt.contracts.compiled import KernelTiming, SearchMode, SearchTarget, TargetKind
from kernelopt.contracts.search import Candidate
from kernelopt.report import DECISIONS_SHOWN, TARGETS_SHOWN, render_markdown

TARGETS = 300
PER_TARGET = 10  # 3,000 candidates
GATES = ("static", "correctness", "performance")


def _target(i: int) -> str:
    return f"triton_poi_fused_add_relu_{i}"


def _decisions() -> list[Decision]:
    out = []
    for t in range(TARGETS):
        for n in range(PER_TARGET):
            passed = n % 4 == 0
            cid = f"{_target(t)}:i0-s0-p{n}-a0"
            out.append(
                Decision(
                    candidate=Candidate(
                        id=cid, target_id=_target(t), parent_id=None, iteration=0, source=None
                    ),
                    accepted=passed,
                    deciding_gate="" if passed else GATES[n % 3],
                    reason="passed gates 1-2" if passed else "max abs error 3.1e-2 > 1e-3",
                    speedup=1.0 + (t * PER_TARGET + n) / 10_000 if passed else None,
                    at=f"2026-12-01T{10 + t // 60:02d}:{t % 60:02d}:{n:02d}",
                )
            )
    return out


def _outcome() -> Outcome:
    timings = [
        KernelTiming(name=_target(i), ms=1.0 / (i + 1), is_library=False) for i in range(TARGETS)
    ]
    timings.append(KernelTiming(name="extern_kernels.convolution", ms=4.0, is_library=True))
    targets = [
        SearchTarget(id=_target(i), kind=TargetKind.KERNEL, kernels=[_target(i)])
        for i in range(TARGETS)
    ]
    return Outcome(
        campaign_id="big",
        problem="large_001_resnet50",
        category=OutcomeCategory.OPTIMIZED,
        speedup=1.05,
        reason="r",
        mode=SearchMode.MULTI,
        triage=summarize(timings, targets, SearchMode.MULTI),
    )


def _table_rows(md: str, header: str) -> list[str]:
    block = md.split(header, 1)[1].split("\n\n", 1)[0]
    return [line for line in block.splitlines()[1:] if line.startswith("|") and "---" not in line]


def test_the_report_stays_a_few_pages_and_its_counts_add_up() -> None:
    decisions = _decisions()
    outcome = _outcome()
    md = render_markdown(outcome, decisions)
    assert len(md.splitlines()) < DECISIONS_SHOWN + 2 * TARGETS_SHOWN + 80
    # the decisions: the fastest winners shown, the rest counted by decision and gate
    rows = _table_rows(md, "| candidate | target | parent |")
    assert len(rows) == DECISIONS_SHOWN
    fastest = max(decisions, key=lambda d: d.speedup or 0.0)
    assert any(r.startswith(f"| {fastest.candidate.id} |") for r in rows)
    assert all("| passed |" in r for r in rows)  # 750 winners: the 60 fastest of them
    note = re.search(r"Not shown: (.*?)\. Every candidate", md)
    assert note is not None
    counted = sum(
        int(n.replace(",", "")) for n in re.findall(r"([\d,]+) (?:passed|rejected)", note.group(1))
    )
    assert counted == len(decisions) - DECISIONS_SHOWN
    by_gate = re.search(r"rejected \((.*?)\)", note.group(1))
    assert by_gate is not None and all(g in by_gate.group(1) for g in GATES)
    assert "`kernelopt audit big`" in md
    # the targets: best first, the rest in one counted row
    target_rows = _table_rows(md, "| target | candidates | passed gates 1-2 |")
    assert len(target_rows) == TARGETS_SHOWN + 1
    assert _target(TARGETS - 1) in target_rows[0]  # the synthetic best speedup
    assert f"| {TARGETS - TARGETS_SHOWN} more targets |" in target_rows[-1]
    # triage: the cut-off in words and the ranked shares, the deferred ones counted
    t = outcome.triage
    assert t is not None and t.deferred_targets
    assert f"Search cut-off: {t.cutoff}." in md
    ranked = _table_rows(md, "| rank | target | kind | share of model time |")
    assert ranked[0].startswith(f"| 1 | {_target(0)} | kernel |")
    assert f"{len(t.deferred_targets)} targets below the cut-off" in ranked[-1]


def test_a_small_campaign_still_lists_every_decision() -> None:
    decisions = _decisions()[: DECISIONS_SHOWN - 1]
    md = render_markdown(_outcome(), decisions)
    assert len(_table_rows(md, "| candidate | target | parent |")) == len(decisions)
    assert "Not shown" not in md


def _audit() -> AuditReport:
    candidates = [
        CandidateAudit(
            id=d.candidate.id,
            target_id=d.candidate.target_id,
            passed_gates_1_2=d.accepted,
            deciding_gate=d.deciding_gate,
            speedup=d.speedup,
            at=d.at,
            final="not_kept" if d.accepted else "rejected",
            final_reason=d.reason,
        )
        for d in _decisions()
    ]
    shipped = candidates[5].model_copy(update={"final": "shipped", "speedup": 1.0001})
    candidates[5] = shipped
    targets = [
        TargetAudit(
            target_id=_target(i),
            status="completed" if i < TARGETS - 1 else "running",
            candidates_tried=PER_TARGET,
            best_kernel_speedup=1.0 + i / 1000,
        )
        for i in range(TARGETS)
    ]
    return AuditReport(campaign_id="big", status="running", candidates=candidates, targets=targets)


def _shown(report: AuditReport, width: int, limit: int | None = CANDIDATES_SHOWN) -> str:
    console = Console(file=io.StringIO(), width=width, record=True, color_system=None)
    print_report(report, console, limit)
    return console.export_text()


def test_the_audit_shows_what_shipped_and_counts_the_rest() -> None:
    report = _audit()
    for width in (200, 80):
        text = _shown(report, width)
        assert len(text.splitlines()) < 8 * CANDIDATES_SHOWN  # not 3,000 rows
        assert report.candidates[5].id in text  # what shipped is always shown
        assert f"{TARGETS:,} searched: {TARGETS - 1:,} completed, 1 running" in text
        more = re.search(r"([\d,]+) more: (.*?) \(every row", " ".join(text.split()))
        assert more is not None
        hidden = int(more.group(1).replace(",", ""))
        assert hidden == len(report.candidates) - CANDIDATES_SHOWN
        parts = re.findall(r"([\d,]+) (rejected|not_kept)", more.group(2))
        assert sum(int(n.replace(",", "")) for n, _ in parts) == hidden
    wide = _shown(report, 200)
    assert f"{TARGETS - 20:,} more targets" in wide
    assert _target(TARGETS - 1) in wide  # the best target leads the targets table
    every = _shown(report, 200, limit=None)
    assert all(c.id in every for c in report.candidates[::TARGETS])


def test_progress_says_how_far_and_what_is_left() -> None:
    p = CampaignProgress(
        campaign_id="big",
        problem="p",
        phase=CampaignPhase.SEARCHING,
        targets_total=340,
        targets_done=12,
        candidates_tried=4123,
        candidates_accepted=900,
        current_target="triton_red_fused_9",
        used=BudgetUse(gpu_seconds=600.0, wall_seconds=3600.0),
    )
    line = progress_summary(p)
    assert line.startswith("targets 12/340 done (4%), 328 left, now triton_red_fused_9")
    assert "candidates 4,123 gated, 900 passed gates 1-2" in line
    assert "5 min and 50 GPU-s per target so far, ~27.3 h left at that pace" in line
    assert "75 s and 50 GPU-s per target so far, ~6.8 h left" in progress_summary(
        p, elapsed_s=900.0
    )
    done = p.model_copy(update={"targets_done": 340, "current_target": None})
    assert "0 left" in progress_summary(done) and "at that pace" not in progress_summary(done)
    fresh = p.model_copy(update={"targets_total": 0, "phase": CampaignPhase.COMPILING})
    assert progress_summary(fresh) == "compiling: no targets yet"
