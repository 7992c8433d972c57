"""CPU activities that write what a campaign leaves behind: the report, the history."""

from __future__ import annotations

import asyncio

from temporalio import activity

from kernelopt.compile.triage_store import load_triage
from kernelopt.config import Settings
from kernelopt.contracts import (
    ArtifactRef,
    ExportInput,
    ExportResult,
    ReportInput,
    ReportResult,
    SearchLogPage,
    names,
)
from kernelopt.gpu_busy import campaign_busy
from kernelopt.report import render_markdown
from kernelopt.store import ArtifactStore, open_store

from .heartbeat import heartbeating


@activity.defn(name=names.WRITE_REPORT)
async def write_report(inp: ReportInput) -> ReportResult:
    async with heartbeating():
        return await asyncio.to_thread(_write_report, inp)


def _write_report(inp: ReportInput) -> ReportResult:
    """Render and store the report (in a thread: long searches archive many log pages)."""
    store = open_store()
    archived = [d for page in expand_pages(store, inp.log_pages) for d in page.decisions]
    outcome = inp.outcome
    if outcome.triage is None and outcome.triage_ref is not None:
        # the per-target table needs the whole triage, which the campaign left in the store
        outcome = outcome.model_copy(update={"triage": load_triage(outcome.triage_ref, store)})
    busy = campaign_busy(Settings.from_env().home, outcome.campaign_id)
    text = render_markdown(outcome, [*archived, *inp.decisions], busy)
    report = store.put_text(text, "text/markdown", f"{inp.outcome.campaign_id}.md")
    summary = store.put_json(inp, f"{inp.outcome.campaign_id}.json")
    return ReportResult(report=report, summary=summary)


def expand_pages(store: ArtifactStore, refs: list[ArtifactRef]) -> list[SearchLogPage]:
    """The log pages in order, each index page (a long search's) replaced by its pages."""
    out: list[SearchLogPage] = []
    stack = list(reversed(refs))
    while stack:
        page = store.get_model(stack.pop(), SearchLogPage)
        if page.pages:
            stack.extend(reversed(page.pages))
        else:
            out.append(page)
    return out


@activity.defn(name=names.EXPORT_HISTORY)
async def export_history(inp: ExportInput) -> ExportResult:
    """Copy a closed campaign's history into the store (audits outlive retention)."""
    handle = activity.client().get_workflow_handle(inp.workflow_id, run_id=inp.run_id)
    async with heartbeating():
        history = await handle.fetch_history()
        ref = await asyncio.to_thread(
            open_store().put_text,
            history.to_json(),
            "application/json",
            f"{inp.workflow_id}.history.json",
        )
    return ExportResult(history=ref)


CPU_ACTIVITIES = [write_report, export_history]
