"""SearchKernel in batch and reply-folder mode on a real Temporal dev server (issue 24, 1-2).

The workflow, the CPU activities (prepare / submit / poll / answer over the
real ``openai`` client and the scripted server's Batch API, or over the reply
folder) and the payload converter are the real ones; the GPU activities are
the doubles of ``tests/workflows/test_search_kernel.py``.  Every history is replayed afterwards.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import time
import uuid
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.worker import Replayer, Worker

from activities import llm_wait_activities, search_activities
from kernelopt.agents import reply_folder
from kernelopt.contracts import names
from kernelopt.contracts.search import ProposerConfig, SearchKernelResult, SearchParams
from tests.support.cli import run_cli
from tests.support.paths import ROOT
from tests.support.polling import until
from tests.support.scripted_openai import (
    NO_LESSONS,
    Reply,
    ScriptedOpenAI,
    executor,
    planner,
    plans_json,
    summarizer,
)
from tests.workflows.test_search_kernel import (
    Gpu,
    kernel_reply,
    search_input,
    with_archived_log,
)
from workflows.search_kernel import SearchKernel

PLANS = plans_json(("bigger blocks", "XBLOCK 2048"), ("vectorize loads", "128-bit loads"))


def script() -> list[Reply]:
    return [
        planner(
            2,
            ("bigger blocks", "XBLOCK 2048"),
            ("vectorize loads", "128-bit loads"),
            prompt_tokens=1000,
        ),
        executor("bigger blocks", content=kernel_reply("MS=0.5"), completion_tokens=300),
        executor("vectorize loads", content=kernel_reply("MS=0.8"), completion_tokens=300),
        summarizer(),
    ]


def llm_input(store, prefix: str, proposer: ProposerConfig, **kw):
    """One round of two plans, no retries, beam 1, planned by ``proposer``."""
    return search_input(
        store,
        f"{prefix}-{uuid.uuid4().hex[:6]}",
        params=SearchParams(iterations=1, plans=2, retries=0, beam=1),
        proposer=proposer,
        use_llm=True,
        **kw,
    )


@asynccontextmanager
async def started(env, inp, gpu: Gpu):
    """The real CPU worker and ``gpu``'s doubles running, and the search started on them."""
    cpu = Worker(
        env.client,
        task_queue=inp.cpu_queue,
        workflows=[SearchKernel],
        activities=[*search_activities.CPU_ACTIVITIES, *llm_wait_activities.CPU_ACTIVITIES],
    )
    async with cpu, Worker(env.client, task_queue=inp.gpu_queue, activities=gpu.activities()):
        yield await env.client.start_workflow(
            names.SEARCH_KERNEL,
            inp,
            id=f"camp/search/k0/{uuid.uuid4().hex[:8]}",
            task_queue=inp.cpu_queue,
            result_type=SearchKernelResult,
        )


async def finish(env, handle) -> SearchKernelResult:
    result = await asyncio.wait_for(handle.result(), 90)
    history = await handle.fetch_history()
    await Replayer(
        workflows=[SearchKernel], data_converter=pydantic_data_converter
    ).replay_workflow(history)
    return with_archived_log(result)


def batch_lines(server: ScriptedOpenAI, batch: dict) -> list[dict]:
    data = server.files[batch["input_file_id"]].decode()
    return [json.loads(line) for line in data.splitlines() if line.strip()]


async def test_batch_mode_round_goes_out_as_batch_jobs_and_waits(env, store):
    gpu = Gpu()
    with ScriptedOpenAI(script(), hold_batches=True) as llm:
        proposer = ProposerConfig(
            base_url=llm.base_url, model="m", api_key_env="NO_KEY_HERE", mode="batch", poll_s=1.0
        )
        inp = llm_input(store, "batch", proposer)
        async with started(env, inp, gpu) as handle:
            await until(lambda: llm.batches, what="the planner's batch")
            polls = llm.batch_polls
            await until(lambda: llm.batch_polls >= polls + 3, what="polls while held")
            assert llm.requests == []  # nothing answered while the batch is pending
            llm.hold_batches = False
            result = await finish(env, handle)
        batches = list(llm.batches.values())
        lines = [batch_lines(llm, b) for b in batches]

    assert result.stopped_reason == "completed 1 iterations"
    # planner, then both executors in ONE job, then the summarizer
    assert [len(x) for x in lines] == [1, 2, 1]
    assert all(b["status"] == "completed" for b in batches)
    assert all(b["metadata"]["kernelopt_key"] for b in batches)
    assert all("-execute-" in line["custom_id"] for line in lines[1])
    accepted = {d.candidate.id: d.speedup for d in result.decisions if not d.retime}
    assert accepted == {"k0:i0-s0-p0-a0": pytest.approx(2.0), "k0:i0-s0-p1-a0": pytest.approx(1.25)}
    assert result.usage.calls == 4
    assert result.usage.prompt_tokens == 1000 + 3 * 100
    assert sorted(e.role for e in result.ledger) == [
        "executor",
        "executor",
        "planner",
        "summarizer",
    ]


async def test_batch_wait_ends_at_the_wall_budget_and_cancels_the_batch(env, store):
    gpu = Gpu()
    with ScriptedOpenAI(script(), hold_batches=True) as llm:
        proposer = ProposerConfig(
            base_url=llm.base_url, model="m", api_key_env="NO_KEY_HERE", mode="batch", poll_s=1.0
        )
        inp = llm_input(store, "bbud", proposer, budget_left={"wall_seconds": 8.0})
        async with started(env, inp, gpu) as handle:
            result = await finish(env, handle)
        (batch,) = llm.batches.values()
    assert result.stopped_reason == "budget exhausted: wall_seconds"
    assert batch["status"] == "cancelled"
    assert result.usage.calls == 0 and result.candidates_tried == 0


def cli(home: Path, env_client_target: str, *args: str) -> subprocess.CompletedProcess:
    env = {
        **os.environ,
        "KERNELOPT_HOME": str(home),
        "KERNELOPT_TEMPORAL_ADDRESS": env_client_target,
        "KERNELOPT_NAMESPACE": "default",
        "PYTHONPATH": str(ROOT),
        "COLUMNS": "80",
    }
    return run_cli(args, env, timeout=60)


async def test_folder_mode_waits_for_reply_files_and_kernelopt_reply(env, store, tmp_path):
    gpu = Gpu()
    home = tmp_path / "home"
    folder = reply_folder.folders(home / "llm")
    proposer = ProposerConfig(model="m", mode="folder", poll_s=120.0)  # no endpoint at all
    inp = llm_input(store, "fold", proposer)
    target = env.client.service_client.config.target_host
    async with started(env, inp, gpu) as handle:
        (plan,) = await until(lambda: reply_folder.pending(folder), what="the planner's request")
        # self-contained: the whole prompt, with the kernel source, and how to answer
        assert plan["role"] == "plan" and plan["round"] == 0 and plan["target_id"] == "k0"
        assert plan["workflow_id"] == handle.id and "JSON object" in plan["reply_format"]
        assert '"no_plan"' in plan["reply_format"]  # declining is an answer too
        assert [m["role"] for m in plan["messages"]] == ["system", "user"]
        assert "triton_poi_fused_add_mul_relu_0" in plan["messages"][1]["content"]
        shown = cli(home, target, "pending")
        assert shown.returncode == 0, shown.stderr
        assert plan["request_id"] in shown.stdout
        assert all(len(line) <= 80 for line in shown.stdout.splitlines())
        # a reply file dropped into replies/, and the signal `kernelopt reply` would send
        reply_folder.deliver(folder, plan["request_id"], PLANS)
        await handle.signal("llm_reply", plan["request_id"])
        executors = await until(
            lambda: (p := reply_folder.pending(folder)) and len(p) == 2 and p,
            timeout=60,
            what="the two executor requests",
        )
        assert {e["role"] for e in executors} == {"execute"}
        assert all("Plan (" in e["messages"][-1]["content"] for e in executors)
        for e in executors:
            text = e["messages"][-1]["content"]
            marker = "MS=0.5" if "Plan (bigger blocks)" in text else "MS=0.8"
            answer = tmp_path / f"{e['request_id']}.md"
            answer.write_text(kernel_reply(marker))
            done = cli(home, target, "reply", e["request_id"], str(answer))
            assert done.returncode == 0, done.stderr
            assert "the search was told" in done.stdout
        answered = time.monotonic()
        (summary,) = await until(
            lambda: [p for p in reply_folder.pending(folder) if p["role"] == "summarize"],
            what="the summarizer's request",
        )
        # the signal woke the search: far sooner than the 120-s poll pause
        assert time.monotonic() - answered < 60
        reply_folder.deliver(folder, summary["request_id"], NO_LESSONS)
        await handle.signal("llm_reply", summary["request_id"])
        result = await finish(env, handle)
    assert result.stopped_reason == "completed 1 iterations"
    accepted = {d.candidate.id: d.speedup for d in result.decisions if not d.retime}
    assert accepted == {"k0:i0-s0-p0-a0": pytest.approx(2.0), "k0:i0-s0-p1-a0": pytest.approx(1.25)}
    assert reply_folder.pending(folder) == []
    assert len(list(folder.answered.glob("*.reply.md"))) == 4
    assert result.usage.calls == 4 and result.usage.prompt_tokens > 0  # estimated from text
    shown = cli(home, target, "pending")
    assert "No LLM requests waiting" in shown.stdout


async def test_planner_parse_failure_gets_one_retry_in_the_search(env, store):
    gpu = Gpu()
    with ScriptedOpenAI() as llm:
        llm.add(
            Reply(match="could not be used", content=PLANS),
            Reply(match="Propose up to 2 plans", content="I would try bigger blocks."),
            *script()[1:],
        )
        proposer = ProposerConfig(base_url=llm.base_url, model="m", api_key_env="NO_KEY_HERE")
        inp = llm_input(store, "pretry", proposer)
        async with started(env, inp, gpu) as handle:
            result = await finish(env, handle)
        unused = llm.unused()
    assert unused == []
    assert [e.call_id for e in result.ledger if e.role == "planner"] == [
        "root/i0/plan",
        "root/i0/plan/retry",
    ]
    assert len([d for d in result.decisions if not d.retime]) == 2
