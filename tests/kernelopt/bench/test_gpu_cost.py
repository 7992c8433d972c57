"""GPU-seconds per verdict and per problem, from a small synthetic results folder."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelopt.bench.aggregate import summarize
from kernelopt.bench.gpu_cost import (
    COST_FILE,
    collect_notes,
    cost_table,
    gpu_cost,
    main,
    problem_cost_table,
    spread,
)
from kernelopt.bench.report import render_html, render_markdown
from kernelopt.bench.results import load_results
from kernelopt.contracts import Outcome
from kernelopt.contracts.verdicts import GateName, GateStatus, GateVerdict
from kernelopt.gpu_busy import ActivityBusy, BusyTotals, busy_path, record_activity
from tests.support.bench_outcomes import outcome


def _save(root: Path, key: str, o: Outcome) -> None:
    path = root / f"{key}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(o.model_dump_json())


def _problem(name: str, gpu_s: float, candidates: int, model_s: list[float]) -> Outcome:
    verdicts = [
        GateVerdict(gate=GateName.PERFORMANCE, status=GateStatus.FAIL, reason="r", gpu_seconds=s)
        for s in model_s
    ]
    return outcome(name, "fallback", gpu_seconds=gpu_s).model_copy(
        update={"candidates_tried": candidates, "model_verdicts": verdicts}
    )


def _note(home: Path, campaign: str, activity: str, at: float, seconds: float, i: int = 0) -> None:
    """The ``i``-th activity: ten samples at 90%; the worker took 100 idle samples before the
    first and one idle sample after each."""
    start = BusyTotals(samples=100 + 11 * i, busy_samples=10 * i, gpu_sum=900.0 * i)
    end = start.plus(BusyTotals(samples=10, busy_samples=10, gpu_sum=900.0, seconds=seconds))
    record_activity(
        home,
        ActivityBusy(
            campaign_id=campaign,
            activity=activity,
            worker="w1",
            started_at=at,
            ended_at=at + seconds,
            measured=True,
            start=start,
            end=end,
        ),
    )


@pytest.fixture
def after(tmp_path: Path) -> Path:
    root = tmp_path / "after"
    _save(root, "level1/001_a", _problem("001_a", 40.0, 4, [8.0, 10.0]))
    _save(root, "level1/002_b", _problem("002_b", 20.0, 0, []))
    # three gate activities, each followed by one idle (0%) sample of the worker
    for i, secs in enumerate([2.0, 3.0, 4.0]):
        _note(root, "c-001_a", "gate_candidate", 1000.0 + 10 * i, secs, i)
    return root


@pytest.fixture
def before(tmp_path: Path) -> Path:
    root = tmp_path / "before"
    _save(root, "level1/001_a", _problem("001_a", 160.0, 4, [20.0]))
    _save(root, "level1/003_c", _problem("003_c", 60.0, 2, []))
    return root


def test_spread_takes_the_median_and_the_inclusive_90th_percentile() -> None:
    s = spread([float(v) for v in range(10, 0, -1)])
    assert (s.count, s.median, s.p90, s.total) == (10, 5.5, pytest.approx(9.1), 55.0)
    assert spread([3.0]).p90 == 3.0
    assert spread([]).median is None


def test_costs_per_verdict_come_from_outcomes_and_worker_notes(after: Path) -> None:
    cost = gpu_cost(after)
    assert cost.per_problem.median == 30.0
    assert cost.per_candidate.count == 1 and cost.per_candidate.median == 10.0  # 40 / 4
    assert cost.model_verdicts.median == 9.0
    gates = cost.activity("gate_candidate")
    assert (gates.count, gates.median, gates.total) == (3, 3.0, 9.0)
    a = next(p for p in cost.problems if p.key == "level1/001_a")
    # the span runs from the first start to the last end: 30 samples at 90%, 2 idle ones
    assert a.busy_search == pytest.approx(90.0 * 30 / 32)


def test_before_and_after_sit_side_by_side(after: Path, before: Path) -> None:
    head, rows = cost_table(gpu_cost(after), gpu_cost(before))
    assert head[-1] == "median after/before"
    per_problem = rows[0]
    assert per_problem[:3] == ["GPU-s per problem (campaign total, outcome)", "2", "30.0"]
    assert per_problem[-1] == f"{30.0 / 110.0:.2f}x"
    model = next(r for r in rows if r[0].startswith("GPU-s per model-level verdict"))
    assert model[-1] == "0.45x"  # median 9 after, 20 before
    gate = next(r for r in rows if "gate_candidate" in r[0])
    assert gate[5:8] == ["0", "-", "-"]  # the earlier run has no notes
    _, problems = problem_cost_table(gpu_cost(after), gpu_cost(before))
    by_key = {r[0]: r for r in problems}
    assert by_key["level1/001_a"][-1] == "0.25x"  # 40 GPU-s after, 160 before
    assert by_key["level1/001_a"][4:7] == ["3", "3.0", "84%"]
    assert by_key["level1/003_c"][1] == "-"  # only in the earlier run
    assert by_key["level1/002_b"][-3] == "-"  # only in the later run


def test_collect_notes_copies_the_notes_of_the_results_campaigns(tmp_path: Path) -> None:
    results, home = tmp_path / "results", tmp_path / "home"
    _save(results, "level1/001_a", _problem("001_a", 40.0, 4, []))
    _note(home, "c-001_a", "gate_candidate", 1000.0, 5.0)
    _note(home, "c-elsewhere", "gate_candidate", 1000.0, 5.0)
    assert collect_notes(results, home) == 1
    assert busy_path(results, "c-001_a").read_text() == busy_path(home, "c-001_a").read_text()
    assert not busy_path(results, "c-elsewhere").exists()
    assert len(load_results(results)) == 1  # the notes are not read as outcomes


def test_the_suite_report_states_the_costs(after: Path, before: Path) -> None:
    summary = summarize(
        load_results(after), gpu_cost=gpu_cost(after), gpu_cost_before=gpu_cost(before)
    )
    md = render_markdown(summary)
    assert "## GPU-seconds per verdict and per problem, before and after" in md
    assert "| s per `gate_candidate` activity (GPU worker notes) | 3 | 3.0 | 3.8 | 9 |" in md
    assert "GPU cost per problem, before and after" in render_html(summary, figures={})
    plain = render_markdown(summarize(load_results(after)))
    assert "GPU-seconds per verdict" not in plain


def test_the_command_writes_the_before_and_after_section(after: Path, before: Path) -> None:
    assert main([str(after), "--before", str(before)]) == 0
    text = (after / COST_FILE).read_text()
    assert text.startswith("## GPU-seconds per verdict and per problem, before and after")
    assert "| level1/003_c | - |" in text
