"""The HTML audit of a campaign that has not started: no empty plots, no false incidents."""

from __future__ import annotations

import re
from datetime import UTC, datetime

from kernelopt.audit.collect import _incidents
from kernelopt.audit.history import ActivityCall, ParsedRun
from kernelopt.audit.html import PLOT_TITLES, render_html
from kernelopt.audit.model import AuditReport
from tests.kernelopt.audit.test_collect import audit


def not_started() -> AuditReport:
    return AuditReport(
        campaign_id="relu-0001",
        problem="relu",
        source="live",
        status="running",
        phase="compiling",
        started_at=datetime.now(UTC).isoformat(),
        waiting=["waiting for a GPU worker on task queue 'kernelopt-gpu-x'"],
    )


def test_a_campaign_without_data_says_so_instead_of_drawing_empty_plots() -> None:
    page = render_html(not_started())
    assert "<img" not in page
    for title in PLOT_TITLES.values():
        assert f"{title}: no data yet" in page
    assert "waiting for a GPU worker" in page


def test_a_finished_campaign_draws_its_plots_with_legends_outside_the_axes() -> None:
    page = render_html(audit("llm"))
    imgs = re.findall(r"<img [^>]*data-axes='([^']*)' data-legend='([^']*)'", page)
    assert len(imgs) == 3 and "no data yet" not in page
    for axes, legend in imgs:
        if not legend:
            continue
        lx0, ly0, lx1, ly1 = map(float, legend.split(","))
        for box in axes.split(";"):
            ax0, ay0, ax1, ay1 = map(float, box.split(","))
            assert lx1 <= ax0 or lx0 >= ax1 or ly1 <= ay0 or ly0 >= ay1, (legend, box)


def _run(outcome: str, attempt: int, status: str = "running") -> ParsedRun:
    now = datetime.now(UTC)
    run = ParsedRun(
        workflow_id="c",
        run_id="r",
        workflow_type="OptimizeModel",
        input=None,
        started_at=now,
        status=status,
    )
    run.activities.append(
        ActivityCall(
            scheduled_event_id=5,
            activity_type="compile",
            activity_id="1",
            input=None,
            scheduled_at=now,
            attempt=attempt,
            outcome=outcome,
        )
    )
    return run


def test_a_merely_scheduled_activity_is_not_an_incident_but_a_waiting_retry_is() -> None:
    assert _incidents([_run("scheduled", 1)]) == []
    assert _incidents([_run("scheduled", 0)]) == []
    retry = _incidents([_run("scheduled", 2)])
    assert len(retry) == 1 and retry[0].attempts == 2
