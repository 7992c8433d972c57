"""The audit built offline from the recorded histories (tests/histories): no server needed.

The same histories the replay test replays are real campaigns; here they are
read as an auditor would read an export: every candidate with its lineage,
verdicts and final decision, control events, model-level trials and the
consistency checks, plus the renderers.
"""

from __future__ import annotations

import base64
import gzip
import io
import json
import re
from pathlib import Path

import pytest
from rich.console import Console
from temporalio.client import WorkflowHistory

from kernelopt.audit.collect import build_report
from kernelopt.audit.export import referenced_artifacts
from kernelopt.audit.html import render_html
from kernelopt.audit.model import AuditReport
from kernelopt.audit.render import print_report
from kernelopt.contracts import OutcomeCategory
from kernelopt.contracts.audit import WorkflowRun

HISTORIES = Path(__file__).resolve().parents[2] / "histories"
INDEX = json.loads((HISTORIES / "INDEX.json").read_text())["histories"]


def audit(scenario: str) -> AuditReport:
    rows = [
        r for r in INDEX if r["scenario"] == scenario and r["workflow_type"] != "ExportCampaign"
    ]
    runs = []
    for row in rows:
        text = gzip.decompress((HISTORIES / row["file"]).read_bytes()).decode()
        run = WorkflowRun(
            workflow_id=row["workflow_id"],
            run_id=row["run_id"],
            workflow_type=row["workflow_type"],
            status=row["status"],
        )
        runs.append((run, WorkflowHistory.from_json(row["workflow_id"], text)))
    return build_report(rows[0]["workflow_id"], runs, "recorded")


SCENARIOS = sorted({r["scenario"] for r in INDEX})


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_recorded_campaigns_audit_consistently(scenario: str) -> None:
    report = audit(scenario)
    # a stopped campaign has its own status, not "completed / fallback 1.000x"
    assert report.status == ("cancelled" if scenario == "cancelled" else "completed")
    assert report.outcome is not None
    assert report.ok, [c for c in report.checks if not c.ok]
    assert len(report.candidates) == report.outcome.candidates_tried
    for c in report.candidates:
        assert (c.final and c.final_reason and c.verdicts) or c.deciding_gate


def test_optimized_campaign_ships_the_best_of_each_replaced_target() -> None:
    report = audit("optimized")
    assert report.outcome.category == OutcomeCategory.OPTIMIZED
    shipped = {c.target_id: c for c in report.candidates if c.final == "shipped"}
    assert sorted(shipped) == sorted(report.outcome.replaced)
    for target in report.targets:
        if target.target_id in shipped:
            assert target.best == shipped[target.target_id].id
    kept = [t for t in report.model_trials if t.kept]
    assert kept and kept[-1].speedup == pytest.approx(report.outcome.speedup)
    assert not report.controls and not report.incidents


def test_cancelled_campaign_records_who_stopped_it_and_ships_nothing() -> None:
    report = audit("cancelled")
    assert [(e.kind, e.name) for e in report.controls] == [("signal", "stop")]
    assert report.outcome.reason == "cancelled by user" and report.outcome.speedup == 1.0
    assert all(c.final != "shipped" for c in report.candidates)
    best = [c for c in report.candidates if c.final == "unverified"]
    assert all("never re-stitched" in c.final_reason for c in best)


def test_steered_campaign_shows_pause_resume_and_the_budget_change() -> None:
    report = audit("steered")
    names = [(e.kind, e.name) for e in report.controls]
    assert names == [("signal", "pause"), ("update", "set_budgets"), ("signal", "resume")]
    assert report.budgets_initial.max_gpu_seconds is None
    assert report.budgets.max_gpu_seconds == 3600.0 and report.budgets.max_usd == 5.0


def test_llm_candidates_carry_their_plan_prompts_and_retry_fix_lineage() -> None:
    report = audit("llm")
    assert report.used.tokens > 0
    retried = [c for c in report.candidates if c.attempt > 0]
    assert retried, "the scripted gates reject a third of the kernels: retry-fix must show"
    for c in report.candidates:
        assert c.plan_direction and c.conversation is not None
        roles = {p.role for p in c.prompts}
        assert "planner" in roles and ({"executor", "retry_fix"} & roles)
        planner = next(p for p in c.prompts if p.role == "planner")
        assert planner.prompt is not None and planner.reply is not None
    for c in retried:
        earlier = c.id.rsplit("-a", 1)[0] + f"-a{c.attempt - 1}"
        previous = next(x for x in report.candidates if x.id == earlier)
        assert not previous.passed_gates_1_2  # retry-fix follows a rejection
        assert any(p.role == "retry_fix" for p in c.prompts)


def test_continued_campaign_is_one_audit_across_its_runs() -> None:
    report = audit("continue_as_new")
    kinds = [r.workflow_type for r in report.runs]
    assert kinds.count("OptimizeModel") >= 2 and kinds.count("SearchKernel") > 3
    iterations = {c.iteration for c in report.candidates}
    assert iterations == {0, 1, 2}


def test_renderers() -> None:
    report = audit("llm")
    console = Console(record=True, width=250, file=io.StringIO())
    print_report(report, console)
    text = console.export_text()
    assert all(c.id in text for c in report.candidates)
    page = render_html(report)
    images = re.findall(r"base64,([A-Za-z0-9+/=]+)'", page)
    assert len(images) == 3 and all(base64.b64decode(i)[:4] == b"\x89PNG" for i in images)
    assert AuditReport.model_validate_json(report.model_dump_json()) == report


def test_referenced_artifacts_include_every_candidate_source_and_prompt() -> None:
    rows = [r for r in INDEX if r["scenario"] == "llm"]
    histories = [
        WorkflowHistory.from_json(
            r["workflow_id"], gzip.decompress((HISTORIES / r["file"]).read_bytes()).decode()
        )
        for r in rows
    ]
    refs = {a.sha256 for a in referenced_artifacts(histories)}
    report = audit("llm")
    for c in report.candidates:
        assert c.source.sha256 in refs and c.conversation.sha256 in refs
        for p in c.prompts:
            assert p.prompt is None or p.prompt.sha256 in refs


def test_a_gate_call_still_running_is_in_flight_not_lost() -> None:
    """A live campaign's audit: a candidate being gated right now has no decision yet, and
    the check says so instead of failing (the reply-folder evaluation audits live ones)."""
    from temporalio.api.enums.v1 import EventType

    from kernelopt.contracts import names

    rows = [
        r for r in INDEX if r["scenario"] == "optimized" and r["workflow_type"] != "ExportCampaign"
    ]
    runs, cut = [], False
    for row in rows:
        text = gzip.decompress((HISTORIES / row["file"]).read_bytes()).decode()
        history = WorkflowHistory.from_json(row["workflow_id"], text)
        status = row["status"]
        events = list(history.events)
        scheduled = [
            i
            for i, e in enumerate(events)
            if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
            and e.activity_task_scheduled_event_attributes.activity_type.name
            == names.GATE_CANDIDATE
        ]
        if scheduled and not cut:  # the first search that gates: cut after its first gate call
            history = WorkflowHistory(row["workflow_id"], events[: scheduled[0] + 1])
            status, cut = "running", True
        run = WorkflowRun(
            workflow_id=row["workflow_id"],
            run_id=row["run_id"],
            workflow_type=row["workflow_type"],
            status=status,
        )
        runs.append((run, history))
    report = build_report(rows[0]["workflow_id"], runs, "recorded")
    check = next(c for c in report.checks if c.name == "every gated candidate decided")
    assert check.ok and "1 being gated now" in check.detail, check


def test_a_running_campaign_shows_its_wall_time_so_far() -> None:
    """Without an outcome the budget line still counts the campaign's wall time (start to
    its latest event, as its wall budget does) and says what its GPU-s leave out."""
    from kernelopt.audit.history import event_time

    rows = [
        r for r in INDEX if r["scenario"] == "optimized" and r["workflow_type"] != "ExportCampaign"
    ]
    runs = []
    for i, row in enumerate(rows):
        text = gzip.decompress((HISTORIES / row["file"]).read_bytes()).decode()
        history = WorkflowHistory.from_json(row["workflow_id"], text)
        status = row["status"]
        if i == 0:  # the campaign run, cut halfway
            events = list(history.events)
            history = WorkflowHistory(row["workflow_id"], events[: len(events) // 2])
            status = "running"
        runs.append(
            (
                WorkflowRun(
                    workflow_id=row["workflow_id"],
                    run_id=row["run_id"],
                    workflow_type=row["workflow_type"],
                    status=status,
                ),
                history,
            )
        )
    report = build_report(rows[0]["workflow_id"], runs, "recorded")
    assert report.outcome is None
    start = event_time(next(iter(runs[0][1].events)))
    latest = max(event_time(e) for _, h in runs for e in h.events)
    assert report.used.wall_seconds == pytest.approx((latest - start).total_seconds())
    assert report.used.wall_seconds > 0
    console = Console(file=io.StringIO(), width=200)
    print_report(report, console)
    assert "so far: tokens and GPU-s of the finished searches" in console.file.getvalue()
