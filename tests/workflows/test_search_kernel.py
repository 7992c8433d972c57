"""SearchKernel end to end on a real Temporal dev server.

The workflow, the CPU activities (planner / executor / retry-fix /
summarizer over a scripted OpenAI-compatible HTTP server, the built-in
proposer) and the payload converter are the real ones; only the GPU
activities (gate_candidate, profile, screening) are test implementations registered
under the real names on the GPU task queue.  Their verdicts follow markers in
the candidate source, so each scenario says exactly what the gates will do.
"""

from __future__ import annotations

import asyncio
import hashlib
import math
import re
import uuid

import pytest
from temporalio import activity
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.worker import Replayer, Worker

from activities import search_activities
from activities.report_activities import expand_pages
from activities.search_activities import propose_builtin_on_gpu
from kernelopt.contracts import names
from kernelopt.contracts.compiled import (
    SearchMode,
    SearchTarget,
    SegmentResult,
    TargetKind,
    TritonKernel,
)
from kernelopt.contracts.problem import ProblemSpec
from kernelopt.contracts.screening import (
    SCREENED_OUT,
    ScreenInput,
    ScreenResult,
)
from kernelopt.contracts.search import (
    SEARCH_PROGRESS,
    SEARCH_UPDATE_BUDGET,
    Analysis,
    Bottleneck,
    Experience,
    KernelProfile,
    ProfileInput,
    ProfileResult,
    ProposerConfig,
    SearchBudgetUpdate,
    SearchKernelInput,
    SearchKernelResult,
    SearchParams,
    SearchProgress,
)
from kernelopt.contracts.verdicts import (
    CandidateGateInput,
    CandidateGateResult,
    GateName,
    GateStatus,
    GateVerdict,
)
from kernelopt.memory import ExperienceMemory
from kernelopt.store import ArtifactStore, open_store
from tests.support.compiled import stub_compiled
from tests.support.gpu_doubles import passed_all, screening_estimate, stopped_at, stopped_at_static
from tests.support.inductor_samples import POINTWISE
from tests.support.scripted_openai import Reply, ScriptedOpenAI, executor, planner, summarizer
from workflows.search_kernel import SearchKernel

KERNEL = "triton_poi_fused_add_mul_relu_0"
RESULT_TIMEOUT = 60


# --- GPU doubles ---------------------------------------------------------------------------


class Gpu:
    """Test implementations of the GPU activities, with a record of what they were asked.

    A test's own doubles override what one activity answers (``gate``, ``profile_result``,
    ``screen_activity``, ``propose_on_gpu_activity``); the record stays this class's.
    """

    def __init__(self) -> None:
        self.gated: list[str] = []
        self.gate_inputs: list[CandidateGateInput] = []
        self.profiled: list[str] = []
        self.profile_inputs: list[ProfileInput] = []
        self.screened: list[list[str]] = []  # each screening call's candidates
        self.release = asyncio.Event()
        self.release.set()

    def activities(self):
        @activity.defn(name=names.GATE_CANDIDATE)
        async def gate_candidate(inp: CandidateGateInput) -> CandidateGateResult:
            await self.release.wait()
            self.gated.append(inp.candidate_id)
            self.gate_inputs.append(inp)
            return await self.gate(inp)

        @activity.defn(name=names.PROFILE)
        async def profile(inp: ProfileInput) -> ProfileResult:
            self.profiled.append(inp.state_id)
            self.profile_inputs.append(inp)
            return self.profile_result(inp)

        return [gate_candidate, profile, self.screen_activity(), self.propose_on_gpu_activity()]

    async def gate(self, inp: CandidateGateInput) -> CandidateGateResult:
        """The gates' verdicts on the candidate: ``verdicts_for`` its source."""
        return verdicts_for(inp, open_store().get_text(inp.source))

    def profile_result(self, inp: ProfileInput) -> ProfileResult:
        return ProfileResult(
            profile=KernelProfile(source="ncu", sol_compute_pct=20.0, sol_memory_pct=70.0),
            analysis=Analysis(bottleneck=Bottleneck.MEMORY_BOUND, reasoning="memory-bound double"),
            gpu_seconds=1.5,
        )

    def propose_on_gpu_activity(self):
        """The built-in proposer of a CUDA forward target runs on the GPU queue (itself, no
        double)."""
        return propose_builtin_on_gpu

    def screen_activity(self):
        """Screening on by default: estimates from the number the gate double will report."""

        @activity.defn(name=names.SCREEN)
        async def screen_candidates(inp: ScreenInput) -> ScreenResult:
            self.screened.append([c.candidate_id for c in inp.candidates])
            out = []
            for c in inp.candidates:
                source = open_store().get_text(c.source)
                ms = gate_ms(source)
                ok = "FAILS_COMPILE" not in source and "WRONG" not in source
                out.append(
                    screening_estimate(c.candidate_id, ok, ms, "output 0 differs (test double)")
                )
            return ScreenResult(estimates=out, device_seconds=0.01)

        return screen_candidates


STATIC_OK = GateVerdict(
    gate=GateName.STATIC, status=GateStatus.PASS, reason="ran", gpu_seconds=0.25
)
CORRECT = GateVerdict(
    gate=GateName.CORRECTNESS, status=GateStatus.PASS, reason="3 seeds", gpu_seconds=0.25
)


def builtin_ms(source: str) -> float:
    """A smooth made-up landscape over launch configs: best at XBLOCK=4096, 8 warps."""
    header = source.splitlines()[0]
    if "no-eviction-hints" in header:
        return 1.02
    x = int(re.search(r"XBLOCK=(\d+)", header).group(1))
    w = int(re.search(r"num_warps=(\d+)", header).group(1))
    return 0.6 + 0.05 * abs(math.log2(x / 4096)) + 0.04 * abs(math.log2(w / 8))


def gate_ms(source: str, retime: bool = False) -> float:
    """The per-kernel ms the gate double reports for a correct candidate."""
    if "kernelopt built-in variant" in source:
        return builtin_ms(source)
    found = re.search(r"# (RETIME_)?MS=([\d.]+)", source)
    ms = float(found.group(2)) if found else 0.9
    slower = re.search(r"# RETIME_MS=([\d.]+)", source)
    return float(slower.group(1)) if retime and slower else ms


def verdicts_for(inp: CandidateGateInput, source: str) -> CandidateGateResult:
    if "FAILS_COMPILE" in source:
        return stopped_at_static(
            inp.candidate_id,
            GateStatus.ERROR,
            "compile error",
            "triton.CompilationError XYZZY at line 7: unsupported tensor index",
        )
    if "WRONG" in source:
        return stopped_at(
            inp.candidate_id,
            [STATIC_OK],
            gate=GateName.CORRECTNESS,
            status=GateStatus.FAIL,
            reason="seed 0: max abs error 0.5 > 1e-3",
            feedback="wrong values PLUGH at output[0][3]",
        )
    retime = inp.candidate_id.endswith(":retime")
    ms = gate_ms(source, retime)
    return passed_all(inp.candidate_id, [STATIC_OK, CORRECT], ms)


# --- inputs ----------------------------------------------------------------------------------


def search_input(store: ArtifactStore, queue: str, **kw) -> SearchKernelInput:
    src = store.put_text(POINTWISE, name=f"{KERNEL}.py")
    compiled = stub_compiled(
        ProblemSpec(name="relu_chain", source=src),
        src,
        "test-gpu",
        mode="max-autotune-no-cudagraphs",
        ms=1.0,
    )
    kernel = TritonKernel(
        name=KERNEL, source=src, launch_line=1, launch_site="...", kind="pointwise"
    )
    target = SearchTarget(id="k0", kind=TargetKind.KERNEL, kernels=[KERNEL], source=src)
    segment = SegmentResult(
        kernels=[kernel], library_calls=[], mode=SearchMode.MULTI, mode_reason="", targets=[target]
    )
    values = {
        "campaign_id": "camp",
        "compiled": compiled,
        "segment": segment,
        "target": target,
        "gpu_queue": f"{queue}-gpu",
        "cpu_queue": f"{queue}-cpu",
        **kw,
    }
    return SearchKernelInput(**values)


async def run_search(
    env, inp: SearchKernelInput, gpu: Gpu, during=None
) -> tuple[SearchKernelResult, object]:
    cpu_worker = Worker(
        env.client,
        task_queue=inp.cpu_queue,
        workflows=[SearchKernel],
        activities=search_activities.CPU_ACTIVITIES,
    )
    gpu_worker = Worker(env.client, task_queue=inp.gpu_queue, activities=gpu.activities())
    async with cpu_worker, gpu_worker:
        handle = await env.client.start_workflow(
            names.SEARCH_KERNEL,
            inp,
            id=f"camp/search/{inp.target.id}/{uuid.uuid4().hex[:8]}",
            task_queue=inp.cpu_queue,
            result_type=SearchKernelResult,
        )
        if during is not None:
            await during(handle)
        result = await asyncio.wait_for(handle.result(), RESULT_TIMEOUT)
        history = await handle.fetch_history()
    await Replayer(
        workflows=[SearchKernel], data_converter=pydantic_data_converter
    ).replay_workflow(history)
    return with_archived_log(result), history


def with_archived_log(result: SearchKernelResult) -> SearchKernelResult:
    """The result with the decisions and ledger its search paged out to the store put back."""
    pages = expand_pages(open_store(), result.log_pages)
    return result.model_copy(
        update={
            "decisions": [d for p in pages for d in p.decisions] + result.decisions,
            "ledger": [e for p in pages for e in p.ledger] + result.ledger,
        }
    )


def kernel_reply(marker: str, salt: str = "") -> str:
    return (
        "```python\nimport triton\nimport triton.language as tl\n\n"
        f"# {marker}\n# {salt}\n"
        "@triton.jit\n"
        f"def {KERNEL}(in_ptr0, in_ptr1, out_ptr0, xnumel, XBLOCK: tl.constexpr):\n"
        "    pass\n```"
    )


# --- scenarios -------------------------------------------------------------------------------


async def test_llm_search_with_retry_fix_rejections_and_retimed_winner(env, store):
    """Two plans: one good kernel; one that fails to compile, is fixed into a wrong one, then right."""
    gpu = Gpu()
    plans = (("bigger blocks", "XBLOCK 2048"), ("vectorize loads", "128-bit loads"))
    with ScriptedOpenAI() as llm:
        llm.add(
            planner(2, *plans, prompt_tokens=1000, completion_tokens=100),
            # retry-fix rules first: a later request also contains the earlier feedback
            Reply(
                match="wrong values PLUGH", content=kernel_reply("MS=0.8"), completion_tokens=300
            ),
            Reply(match="XYZZY", content=kernel_reply("WRONG"), completion_tokens=300),
            executor(
                "vectorize loads", content=kernel_reply("FAILS_COMPILE"), completion_tokens=300
            ),
            executor(
                "bigger blocks",
                content=kernel_reply("MS=0.5 # RETIME_MS=0.6"),
                completion_tokens=300,
            ),
            summarizer(
                '{"entries": [{"situation": "pointwise, memory bound", "action": "bigger blocks", "effect": "2x", "tags": ["direction/bigger-blocks"]}]}',
            ),
        )
        proposer = ProposerConfig(
            base_url=llm.base_url,
            model="scripted-model",
            api_key_env="NO_KEY_HERE",
            usd_per_mtok_in=1.0,
            usd_per_mtok_out=2.0,
        )
        inp = search_input(
            store,
            f"llm-{uuid.uuid4().hex[:6]}",
            params=SearchParams(iterations=1, plans=2, retries=2, beam=1),
            proposer=proposer,
            use_llm=True,
        )
        result, _ = await run_search(env, inp, gpu)
        requests = list(llm.requests)
        unused = llm.unused()
        url = llm.base_url

    assert unused == []
    assert result.proposer == f"llm:scripted-model @ {url}"
    assert result.stopped_reason == "completed 1 iterations"
    by_id = {d.candidate.id: d for d in result.decisions if not d.retime}
    assert sorted(by_id) == ["k0:i0-s0-p0-a0", "k0:i0-s0-p1-a0", "k0:i0-s0-p1-a1", "k0:i0-s0-p1-a2"]
    assert by_id["k0:i0-s0-p0-a0"].accepted and by_id["k0:i0-s0-p0-a0"].speedup == pytest.approx(
        2.0
    )
    failed_compile = by_id["k0:i0-s0-p1-a0"]
    assert (failed_compile.accepted, failed_compile.deciding_gate) == (False, "static")
    assert failed_compile.verdicts[0].status == GateStatus.ERROR
    wrong = by_id["k0:i0-s0-p1-a1"]
    assert (wrong.accepted, wrong.deciding_gate) == (False, "correctness")
    assert [v.gate for v in wrong.verdicts] == [GateName.STATIC, GateName.CORRECTNESS]
    assert by_id["k0:i0-s0-p1-a2"].accepted and by_id["k0:i0-s0-p1-a2"].candidate.attempt == 2
    # the compile error and the wrong values went back to the executor, in one conversation
    retry_texts = [r.messages[-1]["content"] for r in requests if len(r.messages) > 3]
    assert any("XYZZY" in t for t in retry_texts) and any("PLUGH" in t for t in retry_texts)
    assert result.candidates_tried == 4 and result.candidates_compiled == 3
    # beam width 1: only the best winner is re-timed, and its slower second time counts
    (retime,) = [d for d in result.decisions if d.retime]
    assert retime.candidate.id == "k0:i0-s0-p0-a0" and retime.accepted
    assert gpu.gated.count("k0:i0-s0-p0-a0:retime") == 1
    assert result.best.id == "k0:i0-s0-p0-a0"
    assert result.best_kernel_speedup == pytest.approx(1.0 / 0.6)
    # ledger: planner 1, executor 2, retry_fix 2, summarizer 1
    roles = [e.role for e in result.ledger]
    assert sorted(roles) == [
        "executor",
        "executor",
        "planner",
        "retry_fix",
        "retry_fix",
        "summarizer",
    ]
    assert result.usage.prompt_tokens == 1000 + 5 * 100 and result.usage.calls == 6
    assert result.usage.completion_tokens == 100 + 4 * 300 + 50
    assert result.usage.usd == pytest.approx((1500 * 1.0 + 1350 * 2.0) / 1e6)
    assert gpu.profiled == ["root"]
    assert result.root_profile.analysis.bottleneck == Bottleneck.MEMORY_BOUND
    # profile 1.5 + gates' own gpu_seconds (0.5 + 0.25 + 0.5 + re-time 0.5); the compile failure
    # reported none, so its activity's wall time counts instead
    assert 3.25 < result.gpu_seconds < 3.25 + 2.0
    assert [e.action for e in result.experience] == ["bigger blocks"]
    memory = ExperienceMemory.load(store, result.memory)
    assert len(memory) == 1


async def _scripted_search(
    env, store, params: SearchParams, *replies: Reply, gpu: Gpu | None = None
) -> tuple[SearchKernelResult, list]:
    """An LLM search against scripted replies over HTTP: its result and the requests made."""
    with ScriptedOpenAI() as llm:
        llm.add(*replies)
        proposer = ProposerConfig(base_url=llm.base_url, model="m", api_key_env="NO_KEY_HERE")
        inp = search_input(
            store, f"s-{uuid.uuid4().hex[:6]}", params=params, proposer=proposer, use_llm=True
        )
        result, _ = await run_search(env, inp, gpu or Gpu())
        return result, list(llm.requests)


async def test_a_round_one_candidate_is_compared_with_the_state_it_was_built_on(env, store):
    """Built on a 1.67x state, a 1.25x candidate is a step back: its record says so, so the
    summarizer does not file it as a gain (run 1 did)."""
    result, requests = await _scripted_search(
        env,
        store,
        SearchParams(iterations=2, plans=1, retries=0, beam=1),
        planner(1, ("bigger blocks", "XBLOCK 2048"), later=(("unroll", "two rows"),)),
        executor("bigger blocks", content=kernel_reply("MS=0.5 # RETIME_MS=0.6")),
        executor("unroll", content=kernel_reply("MS=0.8")),
        summarizer(repeat=True),
    )
    summaries = [r.text for r in requests if r.reply is not None and "entries" in r.text]
    by_id = {d.candidate.id: d for d in result.decisions if not d.retime}
    first = by_id["k0:i0-s0-p0-a0"]
    assert first.candidate.parent_speedup is None  # built on Inductor's code
    (later,) = [d for d in by_id.values() if d.candidate.parent_id == first.candidate.id]
    assert later.accepted and later.speedup == pytest.approx(1.25)
    assert later.candidate.parent_speedup == pytest.approx(1.0 / 0.6)  # the kept re-timing
    assert any(
        "0.750x the state it was built on" in t and "slower than the code its change" in t
        for t in summaries
    )


async def test_a_planner_that_declines_ends_the_search_without_another_round(env, store):
    why = "The target is at its bytes-moved floor; the forward needs 1.2x from it."
    gpu = Gpu()
    result, asked = await _scripted_search(
        env,
        store,
        SearchParams(iterations=3, plans=2, retries=0, beam=1),
        Reply(match="Propose up to", content='{"plans": [], "no_plan": "' + why + '"}'),
        summarizer(repeat=True),
        gpu=gpu,
    )
    assert result.stopped_reason == f"the planner proposed no plan: {why}"
    assert len(asked) == 1 and result.decisions == [] and gpu.gated == []  # no retry, no round
    assert [e.role for e in result.ledger] == ["planner"]


async def test_repeated_plans_are_dropped_and_memory_is_retrieved(env, store):
    gpu = Gpu()
    memory = ExperienceMemory()
    memory.add(
        [
            Experience(
                situation="pointwise kernel, memory bound",
                action="try 2048-wide blocks",
                tags=["kind/pointwise"],
            )
        ]
    )
    memory_ref = memory.save(store)

    def salted(messages):  # a distinct, deterministic kernel per (state, plan) prompt
        digest = hashlib.sha256(messages[1]["content"].encode()).hexdigest()[:12]
        return kernel_reply("MS=0.9", digest)

    with ScriptedOpenAI() as llm:
        llm.add(
            Reply(
                match="Do NOT propose these directions again",
                content='{"plans": [{"direction": "Tune Block", "description": "again"}, {"direction": "split work", "description": "new"}]}',
                repeat=True,
            ),
            Reply(
                match="Propose up to",
                content='{"plans": [{"direction": "tune block", "description": "x"}]}',
                repeat=True,
            ),
            Reply(match="Write the complete replacement module", respond=salted, repeat=True),
            summarizer(repeat=True),
        )
        proposer = ProposerConfig(base_url=llm.base_url, model="m", api_key_env="NO_KEY_HERE")
        inp = search_input(
            store,
            f"melt-{uuid.uuid4().hex[:6]}",
            params=SearchParams(
                iterations=3, plans=2, retries=0, beam=2, meltdown_window=3, meltdown_distinct=1
            ),
            proposer=proposer,
            use_llm=True,
            memory=memory_ref,
        )
        result, _ = await run_search(env, inp, gpu)
        planner = [r for r in llm.requests if "Propose up to" in r.text]

    # Since issue 29 the planner is shown the plans tried on the state's lineage and a repeat
    # is dropped before any code is written: "tune block" is developed once, every later
    # answer repeating it is refused (and asked once more), so no meltdown builds up here.
    # (The meltdown bans themselves: tests/workflows/test_search_policy.py, tests/kernelopt/agents/test_roles_http.py.)
    first, later = planner[0], planner[1:]
    assert "Plans already tried" not in first.text and later
    assert all("- tune block: x" in r.text for r in later)
    assert any("repeats one already tried: tune block" in r.text for r in later)
    assert all(
        "try 2048-wide blocks" in r.text for r in planner
    )  # memory retrieved into every prompt
    directions = [d.candidate.plan.direction for d in result.decisions if not d.retime]
    assert directions == ["tune block"]
    assert set(gpu.profiled) >= {"root", "k0:i0-s0-p0-a0"}  # new beam states get profiled
    assert len(gpu.profiled) == len(set(gpu.profiled))  # each state once


async def test_builtin_search_walks_the_launch_space_without_an_llm(env, store):
    gpu = Gpu()
    inp = search_input(
        store,
        f"builtin-{uuid.uuid4().hex[:6]}",
        params=SearchParams(iterations=3, plans=4, beam=2),
        use_llm=False,
        proposer=ProposerConfig(base_url="http://127.0.0.1:9/v1"),  # must never be called
    )
    result, _ = await run_search(env, inp, gpu)
    assert result.proposer.startswith("builtin (no LLM)")
    assert result.ledger == [] and result.usage.total_tokens == 0
    assert result.stopped_reason == "completed 3 iterations"
    tried = [d for d in result.decisions if not d.retime]
    labels = [d.candidate.label for d in tried]
    assert len(labels) == len(set(labels)) == result.candidates_tried
    assert all(d.candidate.proposer == "builtin" for d in tried)
    assert {d.candidate.iteration for d in tried} == {0, 1, 2}
    # later rounds walk from re-timed winners: one coordinate away from their parent's config
    parents = {d.candidate.id: d.candidate.label for d in tried}
    for d in tried:
        if d.candidate.parent_id != "root":
            parent = dict(kv.split("=") for kv in parents[d.candidate.parent_id].split(","))
            child = dict(kv.split("=") for kv in d.candidate.label.split(","))
            assert sum(parent[k] != child[k] for k in child) == 1, (parent, child)
    best_ms = min(builtin_ms(store.get_text(d.candidate.source)) for d in tried if d.accepted)
    assert result.best_kernel_speedup == pytest.approx(1.0 / best_ms)
    assert result.best.label in {d.candidate.label for d in tried}
    assert any(d.retime for d in result.decisions)
    assert result.experience and result.experience[0].action.startswith("pin launch config XBLOCK=")
    # two tiers by default: every round was screened, a full beam's round screened some
    # variants out, and exactly the others went through the cascade
    assert inp.params.screen.enabled and len(gpu.screened) == 3
    gated = {c for c in gpu.gated if not c.endswith(":retime")}
    out = [d for d in tried if d.deciding_gate == SCREENED_OUT]
    assert out and gated == {d.candidate.id for d in tried if d not in out}
    assert all(d.screening is not None and d.screening.untrusted for d in tried)
    assert all(d.verdicts == [] and d.speedup is None for d in out)


async def test_budget_signal_stops_a_running_search_cleanly(env, store):
    gpu = Gpu()
    gpu.release.clear()  # the first gate blocks until the test says so

    async def during(handle):
        for _ in range(200):
            progress = await handle.query(SEARCH_PROGRESS, result_type=SearchProgress)
            if progress.step.startswith("gating"):
                break
            await asyncio.sleep(0.05)
        assert progress.proposer.startswith("builtin")
        await handle.signal(
            SEARCH_UPDATE_BUDGET, SearchBudgetUpdate(budget_left={"gpu_seconds": 1.0})
        )
        progress = await handle.query(SEARCH_PROGRESS, result_type=SearchProgress)
        assert progress.budget_left["gpu_seconds"] is not None
        gpu.release.set()

    inp = search_input(
        store,
        f"budget-{uuid.uuid4().hex[:6]}",
        params=SearchParams(iterations=5, plans=4, beam=2),
        use_llm=False,
    )
    result, _ = await run_search(env, inp, gpu, during)
    assert result.stopped_reason == "budget exhausted: gpu_seconds"
    assert result.iterations_done == 0
    assert result.gpu_seconds >= 1.0
    # the four in-flight candidates finished and were recorded; nothing started after the limit:
    # no re-timing, no second round
    assert result.candidates_tried == len(result.decisions) == 4
    assert len(gpu.gated) == 4
    assert all(":i0-" in cid and not cid.endswith(":retime") for cid in gpu.gated)
    assert result.best is None  # winners that were never re-timed cannot be the answer


async def test_builtin_search_on_a_source_it_cannot_tune_stops_with_the_reason(env, store):
    gpu = Gpu()
    inp = search_input(store, f"forward-{uuid.uuid4().hex[:6]}", use_llm=False)
    forward = store.put_text("class ModelNew:\n    pass\n", name="forward.py")
    target = inp.target.model_copy(
        update={"kind": TargetKind.FORWARD, "kernels": [], "source": forward}
    )
    result, _ = await run_search(env, inp.model_copy(update={"target": target}), gpu)
    assert result.stopped_reason.startswith("built-in proposer has nothing left to try")
    # a forward target gets the algebraic rewrites of the problem's graph, and says why none
    assert "algebraic rewrite" in result.stopped_reason, result.stopped_reason
    assert result.candidates_tried == 0 and result.best is None
    assert gpu.gated == []


def builtin_round_input(store: ArtifactStore, prefix: str) -> SearchKernelInput:
    """One built-in round of two plans, beam 1 (the LLM endpoint configured is never asked)."""
    return search_input(
        store,
        f"{prefix}-{uuid.uuid4().hex[:6]}",
        params=SearchParams(iterations=1, plans=2, beam=1),
        use_llm=False,
        proposer=ProposerConfig(base_url="http://127.0.0.1:9/v1"),
    )


async def test_gates_charge_the_activity_run_time_not_only_the_verdicts(env, store):
    """The whole gate_candidate run holds the GPU; its verdicts report only their children."""

    class HeldGpu(Gpu):
        async def gate(self, inp: CandidateGateInput) -> CandidateGateResult:
            return (await super().gate(inp)).model_copy(update={"device_seconds": 7.0})

    gpu = HeldGpu()
    result, _ = await run_search(env, builtin_round_input(store, "held"), gpu)
    assert len(gpu.gated) >= 2
    # 7 s per gate activity; the verdicts' own 0.5 s each would undercount 14x (plus the
    # screening double's 0.01 s per round: screening is on by default)
    assert gpu.screened
    assert result.gpu_seconds == pytest.approx(7.0 * len(gpu.gated) + 0.01 * len(gpu.screened))
