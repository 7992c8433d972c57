"""Durable LLM waits (issue 24, 1-2): restarts and a moved KERNELOPT_HOME lose nothing.

Real processes throughout: our embedded Temporal dev server (its SQLite
state under ``$KERNELOPT_HOME/server``), CPU and GPU-double workers as OS
processes, the scripted OpenAI-compatible server's Batch API over HTTP, and
the real ``kernelopt reply`` command.

* batch: while a batch is pending the CPU worker is SIGKILLed and the server
  restarted; after the batch completes the search ends normally, and no
  request was submitted twice.
* folder: at a round boundary, with a request waiting, server and workers
  stop, ``KERNELOPT_HOME`` is copied to a new path (the old one deleted), and
  everything restarts there; the waiting request is answered in the new
  home and the search finishes both rounds.
"""

from __future__ import annotations

import asyncio
import functools
import os
import shutil
import subprocess
import uuid
from pathlib import Path

import pytest

from kernelopt.agents import reply_folder
from kernelopt.client import connect
from kernelopt.config import Settings
from kernelopt.contracts import names
from kernelopt.contracts.search import ProposerConfig, SearchKernelResult, SearchParams
from kernelopt.store import open_store
from tests.support import polling
from tests.support.cli import run_cli
from tests.support.processes import WorkerProcess
from tests.support.scripted_openai import Reply, ScriptedOpenAI
from tests.support.temporal import env_for, make_settings, start_server
from tests.workflows.test_search_kernel import kernel_reply, search_input

PLANS = (
    '{"plans": [{"direction": "bigger blocks", "description": "XBLOCK 2048"},'
    ' {"direction": "vectorize loads", "description": "128-bit loads"}]}'
)
# round 2's plans differ: the search drops plans already tried on a state (dedupe-plans)
PLANS_2 = (
    '{"plans": [{"direction": "split reduction", "description": "two-stage sum"},'
    ' {"direction": "persistent kernel", "description": "one program per SM"}]}'
)
SUMMARY = '{"entries": []}'
POLL_S = 0.5  # longest pause between the search's checks (production default: 60 s)
GPU_DELAY_S = "0.02"  # each GPU double's work: what is tested here is the LLM wait


until = functools.partial(polling.until, timeout=90.0)


class Site:
    """A server and its two workers on one KERNELOPT_HOME."""

    def __init__(self, settings: Settings, cpu_queue: str, gpu_queue: str) -> None:
        self.settings = settings
        self.server = start_server(settings)
        # both workers start at once: their imports overlap instead of adding up
        cpu, gpu = (
            WorkerProcess(settings, "cpu", cpu_queue),
            WorkerProcess(settings, "gpu", gpu_queue, KERNELOPT_DOUBLES_DELAY=GPU_DELAY_S),
        )
        self.cpu, self.gpu = cpu.wait_ready(), gpu.wait_ready()

    def stop(self) -> None:
        self.cpu.stop()
        self.gpu.stop()
        self.server.stop()


async def start_search(settings: Settings, inp) -> str:
    client = await connect(settings, start_embedded=False)
    workflow_id = f"{inp.campaign_id}/search/k0/{uuid.uuid4().hex[:6]}"
    await client.start_workflow(names.SEARCH_KERNEL, inp, id=workflow_id, task_queue=inp.cpu_queue)
    return workflow_id


async def result_of(settings: Settings, workflow_id: str) -> SearchKernelResult:
    client = await connect(settings, start_embedded=False)
    handle = client.get_workflow_handle(workflow_id, result_type=SearchKernelResult)
    return await asyncio.wait_for(handle.result(), 120)


async def test_batch_pending_through_worker_kill_and_server_restart(tmp_path, monkeypatch):
    settings = make_settings(tmp_path / "home")
    monkeypatch.setenv("KERNELOPT_HOME", str(settings.home))
    store = open_store(settings.artifacts_dir)
    script = [
        Reply(match="Propose up to 2 plans", content=PLANS),
        Reply(match="Plan (bigger blocks)", content=kernel_reply("MS=0.5")),
        Reply(match="Plan (vectorize loads)", content=kernel_reply("MS=0.8")),
        Reply(match="Outcomes, one line per candidate", content=SUMMARY),
    ]
    with ScriptedOpenAI(script, hold_batches=True) as llm:
        proposer = ProposerConfig(
            base_url=llm.base_url, model="m", api_key_env="NO_KEY_HERE", mode="batch", poll_s=POLL_S
        )
        tag = uuid.uuid4().hex[:6]
        inp = search_input(
            store,
            tag,
            campaign_id=f"batch-{tag}",
            params=SearchParams(iterations=1, plans=2, retries=0, beam=1),
            proposer=proposer,
            use_llm=True,
        )
        site = Site(settings, inp.cpu_queue, inp.gpu_queue)
        try:
            workflow_id = await start_search(settings, inp)
            await until(lambda: llm.batches, what="the planner's batch")
            polls = llm.batch_polls
            await until(lambda: llm.batch_polls >= polls + 2, what="polls while pending")
            site.cpu.kill()  # preempted CPU worker, batch pending
            site.gpu.stop()
            site.server.stop()
            paused = llm.batch_polls
            await asyncio.sleep(4 * POLL_S)
            assert llm.batch_polls == paused  # nobody polls while everything is down
            site = Site(settings, inp.cpu_queue, inp.gpu_queue)
            await until(lambda: llm.batch_polls > paused, what="polling resumed")
            llm.hold_batches = False
            result = await result_of(settings, workflow_id)
        finally:
            site.stop()
        batches = list(llm.batches.values())
        unused = llm.unused()
    assert result.stopped_reason == "completed 1 iterations"
    assert unused == []
    assert len(batches) == 3  # planner, executors, summarizer: none submitted twice
    assert len({b["metadata"]["kernelopt_key"] for b in batches}) == 3
    assert result.usage.calls == 4
    # both executors' candidates were gated (the GPU double accepts or rejects by source)
    assert result.candidates_tried == 2 and result.candidates_accepted >= 1


def reply_cli(settings: Settings, rid: str, path: Path) -> subprocess.CompletedProcess:
    return run_cli(["reply", rid, str(path)], env_for(settings), timeout=60)


def answer(request: dict) -> str:
    if request["role"] == "plan":
        return PLANS_2 if request["round"] else PLANS
    if request["role"] == "summarize":
        return SUMMARY
    text = request["messages"][-1]["content"]
    marker = "MS=0.5" if "Plan (bigger blocks)" in text else "MS=0.8"
    return kernel_reply(marker, request["request_id"])  # distinct kernels in every round


async def answer_round(folder: reply_folder.Folders, until_role: str) -> dict:
    """Answer every request of a round (file drops) until a request of ``until_role`` waits."""
    while True:
        waiting = await until(lambda: reply_folder.pending(folder), what="a request")
        for request in waiting:
            if request["role"] == until_role and request["round"] == 1:
                return request
            reply_folder.deliver(folder, request["request_id"], answer(request))
        asked = {w["request_id"] for w in waiting}
        await until(
            lambda asked=asked: (
                not any(r["request_id"] in asked for r in reply_folder.pending(folder))
            ),
            what="replies collected",
        )


@pytest.mark.slow  # ~30 s; the batch test above carries a wait through a worker kill
async def test_folder_mode_survives_moving_kernelopt_home(tmp_path, monkeypatch):
    first = make_settings(tmp_path / "home-a")
    monkeypatch.setenv("KERNELOPT_HOME", str(first.home))
    store = open_store(first.artifacts_dir)
    tag = uuid.uuid4().hex[:6]
    inp = search_input(
        store,
        tag,
        campaign_id=f"fold-{tag}",
        params=SearchParams(iterations=2, plans=2, retries=0, beam=1),
        proposer=ProposerConfig(model="m", mode="folder", poll_s=POLL_S),
        use_llm=True,
    )
    site = Site(first, inp.cpu_queue, inp.gpu_queue)
    try:
        workflow_id = await start_search(first, inp)
        waiting = await answer_round(reply_folder.folders(first.llm_dir), until_role="plan")
    finally:
        site.stop()
    assert (first.server_dir / "temporal.db").is_file()  # the server's state lives in the home
    # move: copy the whole home, delete the old one, restart everything at the new path
    second = make_settings(tmp_path / "home-b")
    shutil.copytree(first.home, second.home)
    shutil.rmtree(first.home)
    monkeypatch.setenv("KERNELOPT_HOME", str(second.home))
    folder = reply_folder.folders(second.llm_dir)
    assert [r["request_id"] for r in reply_folder.pending(folder)] == [waiting["request_id"]]
    site = Site(second, inp.cpu_queue, inp.gpu_queue)
    try:
        path = tmp_path / "plan-reply.md"
        path.write_text(PLANS_2)  # round 2's planner was the request left waiting
        done = reply_cli(second, waiting["request_id"], path)
        assert done.returncode == 0, done.stderr
        assert "the search was told" in done.stdout
        finished = asyncio.ensure_future(result_of(second, workflow_id))
        while not finished.done():  # round 1's executors and summarizer, answered as asked
            for request in reply_folder.pending(folder):
                reply_folder.deliver(folder, request["request_id"], answer(request))
            await asyncio.wait({finished}, timeout=0.2)
        result = finished.result()
    finally:
        site.stop()
    assert not first.home.exists()
    assert result.stopped_reason == "completed 2 iterations"
    assert result.usage.calls == 8  # 2 rounds x (planner + 2 executors + summarizer)
    assert len(list(folder.answered.glob("*.reply.md"))) == 8
    assert reply_folder.pending(folder) == []
    assert os.listdir(folder.requests) == []
