"""``kernelopt audit``: every candidate with lineage, gates and decision -- live and after retention.

A real campaign (real workflows and CPU activities, GPU doubles) is audited
from the server's history, exported into the artifact store by the
ExportCampaign workflow, then audited through a server that never knew it
(what a server past its retention window is) from the export alone: the two
audits must be the same.  The terminal table, ``--json`` and the self-contained HTML report
go through the real CLI entry point.
"""

from __future__ import annotations

import asyncio
import base64
import json
import re
from pathlib import Path

import pytest
from temporalio.client import Client
from temporalio.service import RPCError

from kernelopt.audit import CampaignNotFound, load_report
from kernelopt.audit.export import find_export, pointer_path
from kernelopt.client import connect
from kernelopt.config import Settings
from kernelopt.contracts import CampaignPhase, GateName
from kernelopt.store import ArtifactStore, open_store
from tests.durability.support import (
    DevServer,
    Worker,
    export_of,
    module_workers,
    options,
    outcome_of,
    queues,
    submit,
    wait_for_phase,
    wait_until,
)
from tests.support.cli import cli_in_process
from tests.support.temporal import make_settings

workers = module_workers("audit-logs", "0.02")


@pytest.fixture(scope="module")
async def finished(client: Client, temporal_settings: Settings, workers):
    """A finished campaign and its live audit."""
    handle = await submit(client, temporal_settings, options(*workers))
    outcome = await asyncio.wait_for(outcome_of(client, handle.id), 120)
    store = open_store(temporal_settings.artifacts_dir)
    return handle.id, outcome, await load_report(client, handle.id, store)


@pytest.fixture
def artifacts(temporal_settings: Settings) -> ArtifactStore:
    return open_store(temporal_settings.artifacts_dir)


async def test_live_audit_explains_every_candidate(finished) -> None:
    _, outcome, report = finished
    assert report.source == "live" and report.status == "completed"
    assert len(report.candidates) == outcome.candidates_tried > 0
    assert len({c.id for c in report.candidates}) == len(report.candidates)
    screened_out = [c for c in report.candidates if c.final == "screened_out"]
    for c in report.candidates:
        assert c.parent_id and c.proposer == "builtin" and c.label, c.id  # lineage
        assert c.source is not None  # the code that was judged
        if c in screened_out:  # screening is on by default: the first tier's estimate only
            assert c.screening and not c.screening.selected and not c.verdicts, c.id
            assert c.final_reason
            continue
        assert c.verdicts and c.verdicts[0].gate == GateName.STATIC
        assert c.final in {"shipped", "rejected", "superseded", "dropped", "not_kept"}
        assert c.final_reason
        if not c.passed_gates_1_2:
            failed = [v for v in c.verdicts if not v.passed]
            assert c.deciding_gate == failed[0].gate.value
            assert failed[0].thresholds, "a rejection names the thresholds it was judged by"
    shipped = [c for c in report.candidates if c.final == "shipped"]
    assert sorted(c.target_id for c in shipped) == sorted(outcome.replaced)
    assert report.model_trials and any(t.kept for t in report.model_trials)
    for trial in report.model_trials:
        assert trial.verdicts and trial.verdicts[-1].thresholds.get("gamma") == 1.03
    assert report.ok, [c for c in report.checks if not c.ok]


async def test_campaign_counts_each_accepted_candidate_once(finished) -> None:
    """Re-timing a winner is a second decision about the same candidate, not a second candidate."""
    _, outcome, report = finished
    accepted = sum(1 for c in report.candidates if c.passed_gates_1_2)
    assert outcome.candidates_accepted == accepted


async def test_export_then_audit_after_the_server_forgot_the_campaign(
    client: Client, temporal_settings: Settings, workers, artifacts: ArtifactStore, tmp_path: Path
) -> None:
    cpu_q, _ = workers
    handle = await submit(client, temporal_settings, options(*workers))
    await asyncio.wait_for(outcome_of(client, handle.id), 120)
    # the campaign starts its own export as it closes (once integrated); else start one
    result = await asyncio.wait_for(export_of(client, handle.id, cpu_q), 60)
    live = await load_report(client, handle.id, artifacts)
    assert result.runs == len(live.runs) == 1 + len(live.targets)
    assert result.missing == 0 and result.artifacts > len(live.candidates)
    assert pointer_path(artifacts, handle.id).is_file()
    _, index = find_export(artifacts, handle.id)
    referenced = {a.sha256 for a in index.artifacts}
    for c in live.candidates:
        assert c.source.sha256 in referenced  # every judged source is in the export
    assert live.outcome.report.sha256 in referenced

    # past the retention window the server no longer knows the campaign; a fresh server
    # (same artifact store) is the same situation, and the dev server's delete is lazy
    amnesiac = make_settings(tmp_path / "fresh-home")
    server = DevServer(amnesiac).start()
    try:
        forgetful = await connect(amnesiac, start_embedded=False)
        with pytest.raises(RPCError):
            await forgetful.get_workflow_handle(handle.id).describe()
        archived = await load_report(forgetful, handle.id, artifacts)
        with pytest.raises(CampaignNotFound):
            await load_report(forgetful, "no-such-campaign", artifacts)
    finally:
        server.stop()
    assert archived.source.startswith("export ")
    assert archived.model_dump(exclude={"source"}) == live.model_dump(exclude={"source"})


async def test_audit_of_a_running_campaign_is_provisional(
    client: Client, temporal_settings: Settings, workers, artifacts: ArtifactStore, tmp_path: Path
) -> None:
    cpu_q, _ = workers
    _, gpu_q = queues()  # a slow GPU worker of its own, so the search is caught mid-way
    gpu = Worker(temporal_settings, "gpu", gpu_q, tmp_path, KERNELOPT_DOUBLES_DELAY="0.25")
    try:
        gpu.wait_ready()
        handle = await submit(client, temporal_settings, options(cpu_q, gpu_q))
        await wait_for_phase(handle, CampaignPhase.SEARCHING)

        async def mid_search() -> bool:
            report = await load_report(client, handle.id, artifacts)
            return any(c.provisional for c in report.candidates)

        await wait_until(mid_search, 60, every=0.3, what="a candidate of a running search")
        report = await load_report(client, handle.id, artifacts)
        await handle.signal("stop", "test over")
        await asyncio.wait_for(outcome_of(client, handle.id), 60)
    finally:
        gpu.stop()
    assert report.status == "running" and report.outcome is None
    running = [t for t in report.targets if t.status == "running"]
    assert running
    provisional = [c for c in report.candidates if c.provisional]
    assert provisional and all(c.target_id == running[0].target_id for c in provisional)
    for c in provisional:
        assert c.verdicts and c.final in {"pending", "rejected"}, (c.id, c.final)
        assert c.source is not None
        assert c.iteration == int(re.search(r":i(\d+)-", c.id).group(1))  # lineage from the id
    assert all(c.final != "shipped" for c in report.candidates)


async def test_cli_audit_table_json_and_self_contained_html(
    finished, cli_env, capsys, tmp_path: Path
) -> None:
    campaign_id, outcome, report = finished
    html_path = tmp_path / "audit.html"
    code, out = await cli_in_process(capsys, "audit", campaign_id, "--html", str(html_path))
    assert code == (0 if report.ok else 1)
    for c in report.candidates:
        assert c.id in out
    assert "consistency checks" in out and "model-level gates" in out

    code, out = await cli_in_process(capsys, "audit", campaign_id, "--json")
    data = json.loads(out)
    assert data["campaign_id"] == campaign_id
    assert len(data["candidates"]) == outcome.candidates_tried
    # every candidate has the cascade's verdicts, or was screened out before it
    assert all(c["verdicts"] or c["final"] == "screened_out" for c in data["candidates"])

    page = html_path.read_text()
    assert page.startswith("<!doctype html>")
    images = re.findall(r"src='data:image/png;base64,([A-Za-z0-9+/=]+)'", page)
    assert len(images) == 3  # speedup over time, rejections by gate, budget use
    for image in images:
        assert base64.b64decode(image).startswith(b"\x89PNG")
    # self-contained: no external script, stylesheet or image
    assert not re.search(r"(src|href)=['\"](?!data:)", page)
    for c in report.candidates:
        assert c.id in page


async def test_a_finished_campaign_exports_itself(finished, artifacts: ArtifactStore) -> None:
    """OptimizeModel starts its own export as it closes; the export outlives it (ABANDON)
    and ends "completed", with the live audit's runs."""
    campaign_id, _, report = finished
    await wait_until(
        lambda: find_export(artifacts, campaign_id) is not None, 60, what="the campaign's export"
    )
    _, index = find_export(artifacts, campaign_id)
    assert index.status == "completed"
    assert [r.run.run_id for r in index.runs] == [r.run_id for r in report.runs]
