"""A built-in campaign gives the rewrite family the whole forward, besides the kernel targets.

The real OptimizeModel and SearchKernel workflows and the real CPU activities
(segmentation, the built-in proposer, reports) on the session's dev server; the
GPU activities are the doubles (``tests/support/gpu_doubles.py``), whose compile
step returns the wrapper captured on the H200 for the problem.  The problem
multiplies by ``torch.diag(a)``: the diagonal-broadcast rewrite must reach
gate_candidate as a whole-forward candidate, while the wrapper's kernel is still
searched by the kernel families -- and the campaign's history, with its new
patch marker, must replay on today's workflows.
"""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.worker import Replayer

import worker
from activities.report_activities import expand_pages
from kernelopt.campaigns import prepare_problem, start_campaign
from kernelopt.config import Settings
from kernelopt.contracts import Outcome, SearchKernelResult
from kernelopt.store import open_store
from tests.support.campaigns import small_options
from tests.support.processes import start_workers
from tests.support.temporal import search_ids

ROOT = Path(__file__).resolve().parents[2]
PROBLEM = ROOT / "problems" / "level1" / "023_diag_matmul.py"
KERNEL = "triton_poi_fused_diag_embed_0"  # the H200 wrapper's one kernel (fixture)


async def test_a_builtin_campaign_proposes_a_rewrite_of_the_whole_forward(
    client: Client, temporal_settings: Settings
) -> None:
    tag = uuid.uuid4().hex[:8]
    cpu_q, gpu_q = f"cpu-{tag}", f"gpu-{tag}"
    cpu, gpu = start_workers(temporal_settings, cpu_q, gpu_q)
    store = open_store(temporal_settings.artifacts_dir)
    try:
        problem = prepare_problem(PROBLEM, store)
        handle = await start_campaign(client, problem, small_options(cpu_q, gpu_q))
        outcome: Outcome = await asyncio.wait_for(handle.result(), 300)
        searches = {}
        for child in await search_ids(client, handle.id):
            handle_of = client.get_workflow_handle(child, result_type=SearchKernelResult)
            result = await handle_of.result()
            searches[result.target_id] = result
    finally:
        cpu.stop()
        gpu.stop()

    assert outcome.mode is not None and outcome.mode.value == "single"
    assert set(searches) == {"forward", KERNEL}, sorted(searches)
    assert searches[KERNEL].candidates_tried > 0  # the kernel families still had their turn

    forward_search = searches["forward"]
    pages = expand_pages(store, forward_search.log_pages)  # a finished search archives its log
    decisions = [*forward_search.decisions, *(d for p in pages for d in p.decisions)]
    rewrites = [d for d in decisions if d.candidate.label.startswith("rewrite:")]
    labels = {d.candidate.label for d in rewrites}
    assert "rewrite:diag-broadcast" in labels, forward_search.stopped_reason
    judged = next(d for d in rewrites if d.candidate.label == "rewrite:diag-broadcast")
    assert judged.verdicts, judged.reason  # it went through gate_candidate
    text = store.get_text(judged.candidate.source)
    forward = text.split("class ModelNew(Model):", 1)[1]
    assert "torch.diag" not in forward and "mul" in forward

    history = await handle.fetch_history()
    replayer = Replayer(
        workflows=worker.workflows(),
        data_converter=pydantic_data_converter,
        workflow_runner=worker.workflow_runner(),
    )
    await replayer.replay_workflow(history)  # raises on non-determinism
    markers = [
        e.marker_recorded_event_attributes.SerializeToString()
        for e in history.events
        if e.HasField("marker_recorded_event_attributes")
    ]
    assert any(b"builtin-rewrites-whole-forward" in m for m in markers)
