"""The agents' facts and feedback reach real searches (issue 29, points 1, 3 and 5).

SearchKernel runs on a real Temporal dev server with the real CPU activities:
the planner, executor and retry-fix talk over real HTTP (the ``openai``
client) to the scripted server, and each test reads what that server was
sent.  Only the GPU activities are doubles (``tests.workflows.test_search_kernel``);
every history is replayed afterwards.
"""

from __future__ import annotations

import itertools
import uuid

import pytest

from kernelopt.agents.facts import build_facts
from kernelopt.contracts.compiled import (
    KernelArg,
    KernelTiming,
    SearchTarget,
    TargetKind,
    TensorSpec,
    TriageResult,
    TritonKernel,
)
from kernelopt.contracts.search import (
    Analysis,
    Bottleneck,
    Hardware,
    KernelProfile,
    ProfileInput,
    ProfileResult,
    ProposerConfig,
    SearchKernelInput,
    SearchParams,
)
from tests.support.scripted_openai import (
    Reply,
    ScriptedOpenAI,
    executor,
    planner,
    summarizer,
)
from tests.workflows.test_search_kernel import (
    KERNEL,
    Gpu,
    kernel_reply,
    run_search,
    search_input,
)

OTHER = "triton_red_fused_sum_1"
SIGNATURE = [
    KernelArg(
        name="in_ptr0",
        tensor=TensorSpec(shape=[64, 1024], stride=[1024, 1], dtype="torch.float32"),
        expr="arg0_1",
        role="in",
    ),
    KernelArg(
        name="out_ptr0",
        tensor=TensorSpec(shape=[64, 1024], stride=[1024, 1], dtype="torch.float32"),
        expr="buf0",
        role="out",
    ),
    KernelArg(name="xnumel", value=65536, expr="65536", role="scalar"),
]
SUMMARY = (
    '{"entries": [{"situation": "pointwise kernel, memory bound", "action": '
    '"XBLOCK 2048 MEMO_WORD", "effect": "2x", "tags": ["direction/bigger-blocks"]}]}'
)


class RecordingGpu(Gpu):
    """The search tests' GPU doubles, the profiler's answer naming the hardware."""

    def profile_result(self, inp: ProfileInput) -> ProfileResult:
        return ProfileResult(
            profile=KernelProfile(source="ncu", sol_memory_pct=70.0),
            analysis=Analysis(bottleneck=Bottleneck.MEMORY_BOUND, reasoning="double"),
            hardware=Hardware(name="Double GPU", sm_count=132, source="device"),
        )


def triage(per_kernel: dict[str, float]) -> TriageResult:
    total = sum(per_kernel.values())
    return TriageResult(
        total_ms=total,
        library_ms=0.0,
        triton_ms=total,
        library_fraction=0.0,
        ceilings={},
        required_speedup=None,
        verdict="worth_searching",
        per_kernel=[KernelTiming(name=k, ms=ms, is_library=False) for k, ms in per_kernel.items()],
    )


def proposer(llm: ScriptedOpenAI) -> ProposerConfig:
    return ProposerConfig(base_url=llm.base_url, model="scripted", api_key_env="NO_KEY_HERE")


def kernel_search(store, llm, params: SearchParams, with_facts: bool = True) -> SearchKernelInput:
    """A kernel target with a signature; facts as the campaign builds them (40% of the forward)."""
    base = search_input(store, f"wire-{uuid.uuid4().hex[:6]}")
    target = base.target.model_copy(update={"signature": SIGNATURE})
    other = TritonKernel(name=OTHER, source=target.source, launch_line=9, launch_site="...")
    segment = base.segment.model_copy(
        update={"kernels": [*base.segment.kernels, other], "targets": [target]}
    )
    facts = build_facts(base.compiled, segment, target, triage({KERNEL: 0.02, OTHER: 0.03}))
    return base.model_copy(
        update={
            "target": target,
            "segment": segment,
            "facts": facts if with_facts else None,
            "params": params,
            "proposer": proposer(llm),
            "use_llm": True,
        }
    )


def executor_requests(llm: ScriptedOpenAI, direction: str) -> list[str]:
    return [
        r.text
        for r in llm.requests
        if f"Plan ({direction})" in r.text and "Make it faster" not in r.text
    ]


def salted(marker: str):
    """An executor reply whose source differs per request (no duplicate-source rejections)."""
    counter = itertools.count()
    return lambda messages: kernel_reply(marker, salt=f"salt {next(counter)}")


def two_rounds(bigger: str, vectorize: str, unroll: str) -> tuple[Reply, ...]:
    """Round 0 plans "bigger blocks" and "vectorize loads", a later round "unroll loop";
    each plan's executor answers with its marker (salted), the summarizer with no lessons."""
    return (
        planner(
            2,
            ("bigger blocks", "XBLOCK 2048"),
            ("vectorize loads", "128-bit loads"),
            later=(("unroll loop", "unroll by 4"),),
        ),
        executor("bigger blocks", respond=salted(bigger)),
        executor("vectorize loads", respond=salted(vectorize)),
        executor("unroll loop", respond=salted(unroll)),
        summarizer(repeat=True),
    )


async def test_executor_prompt_carries_facts_memory_and_repeats_are_not_developed(env, store):
    """Round 0 at the root; round 1 plans the same two ideas on every beam state: developed once."""
    gpu = RecordingGpu()
    with ScriptedOpenAI() as llm:
        llm.add(
            planner(
                2,
                ("bigger blocks", "XBLOCK 2048"),
                ("vectorize loads", "128-bit loads"),
                later=(
                    ("unroll loop", "unroll the inner loop by 4"),
                    ("evict first", "eviction hints on the loads"),
                ),
            ),
            executor("bigger blocks", respond=salted("MS=0.5"), repeat=True),
            executor("vectorize loads", respond=salted("MS=0.8"), repeat=True),
            executor("unroll loop", respond=salted("MS=0.45"), repeat=True),
            executor("evict first", respond=salted("MS=0.4"), repeat=True),
            summarizer(SUMMARY, repeat=True),
        )
        inp = kernel_search(store, llm, SearchParams(iterations=2, plans=2, retries=0, beam=3))
        result, _ = await run_search(env, inp, gpu)
        planners = [r.text for r in llm.requests if "Propose up to 2 plans" in r.text]
        bigger = executor_requests(llm, "bigger blocks")
        unroll = executor_requests(llm, "unroll loop")
        evict = executor_requests(llm, "evict first")

    assert result.stopped_reason == "completed 2 iterations"
    # round 1 planned on several states, each proposing the same two plans...
    round1 = [p for p in planners if "Plans already tried" in p]
    assert len(round1) >= 2, len(round1)
    # ... and each idea was written (and gated) once
    assert len(unroll) == 1 and len(evict) == 1
    developed = [d.candidate.plan.direction for d in result.decisions if not d.retime]
    assert developed.count("unroll loop") == 1 and developed.count("evict first") == 1
    # the planner was told what was tried on the state's lineage
    assert all("- bigger blocks: XBLOCK 2048" in p for p in round1)
    # the facts: signature table, launch line, Amdahl line, hardware from the GPU worker
    prompt = bigger[0]
    assert "| # | parameter | wrapper expr | role | shape | stride | dtype / value |" in prompt
    assert "| 1 | out_ptr0 | buf0 | out | [64, 1024] | [1024, 1] | torch.float32 |" in prompt
    assert "this target's share: 40.0%" in prompt
    assert "Amdahl: 1 / ((1 - 0.400) + 0.400 / S) >= 1.03" in prompt
    assert "Double GPU" in prompt
    # the memory the summariser wrote after round 0 reaches the round-1 executor
    assert "MEMO_WORD" not in prompt
    assert "MEMO_WORD" in unroll[0]
    assert [inp.kernel_times for inp in gpu.profile_inputs] == [{}] * len(gpu.profile_inputs)


async def test_without_facts_the_prompt_says_so(env, store):
    """The same search without facts (an old campaign): the numbers section is absent, not made up."""
    with ScriptedOpenAI() as llm:
        llm.add(
            planner(1, ("bigger blocks", "XBLOCK 2048")),
            executor("bigger blocks", content=kernel_reply("MS=0.5")),
            summarizer(),
        )
        params = SearchParams(iterations=1, plans=1, retries=0, beam=1)
        inp = kernel_search(store, llm, params, with_facts=False)
        await run_search(env, inp, RecordingGpu())
        prompt = executor_requests(llm, "bigger blocks")[0]
    assert "(baseline numbers not provided)" in prompt
    assert "Amdahl" not in prompt


async def test_a_later_round_on_the_same_state_sees_its_siblings(env, store):
    """Every round-0 candidate is rejected, so round 1 plans on the root again and is told why."""
    with ScriptedOpenAI() as llm:
        llm.add(*two_rounds("WRONG", "FAILS_COMPILE", "MS=0.5"))
        inp = kernel_search(store, llm, SearchParams(iterations=2, plans=2, retries=0, beam=1))
        result, _ = await run_search(env, inp, RecordingGpu())
        first_round = executor_requests(llm, "bigger blocks")[0]
        later = executor_requests(llm, "unroll loop")[0]

    assert result.stopped_reason == "completed 2 iterations"
    assert "Sibling attempts" not in first_round  # none had a result yet: no empty section
    assert "- bigger blocks: rejected at correctness: fail: seed 0: max abs error 0.5" in later
    assert "- vectorize loads: rejected at static: error: compile error" in later


async def test_a_retry_is_told_the_siblings_results_and_plans_known_by_then(env, store):
    """The retry's own message lists the siblings' results and plans, not only its first turn."""
    with ScriptedOpenAI() as llm:
        llm.add(
            Reply(match="Your module was rejected", respond=salted("WRONG"), repeat=True),
            *two_rounds("WRONG", "WRONG", "WRONG"),
        )
        inp = kernel_search(store, llm, SearchParams(iterations=2, plans=2, retries=1, beam=1))
        await run_search(env, inp, RecordingGpu())
        retries = [
            str(r.messages[-1]["content"])
            for r in llm.requests
            if "Plan (unroll loop)" in r.text and "Your module was rejected" in r.text
        ]
    (retry,) = retries
    assert retry.startswith("Your module was rejected.")
    assert "## Sibling attempts on this state" in retry
    assert "- bigger blocks: rejected at correctness" in retry and "[plan: XBLOCK 2048]" in retry
    assert "[plan: 128-bit loads]" in retry
    assert "unroll loop" not in retry.split("## Sibling attempts")[1]  # its own plan is left out


async def test_a_slower_accepted_candidate_gets_exactly_one_timing_retry(env, store):
    """A whole-model target: the profiler gets triage's times, the executor Inductor's kernels;
    a correct but slower module is told its speed once, and the (still slow) answer ends it."""

    def model(marker: str) -> str:
        kernel = kernel_reply(marker).removeprefix("```python\n").removesuffix("```")
        return f"```python\nimport torch\n{kernel}\nclass ModelNew(torch.nn.Module):\n    pass\n```"

    gpu = RecordingGpu()
    with ScriptedOpenAI() as llm:
        llm.add(
            planner(
                2, ("fuse all", "one kernel for the forward"), ("fast path", "skip the reduction")
            ),
            # the timing retry first: its request also holds the first attempt's prompt
            Reply(match="Make it faster", content=model("MS=1.05"), repeat=True),
            executor("fuse all", content=model("MS=1.1")),
            executor("fast path", content=model("MS=0.5")),
            summarizer(),
        )
        base = search_input(store, f"wire-{uuid.uuid4().hex[:6]}")
        target = SearchTarget(
            id="forward",
            kind=TargetKind.FORWARD,
            kernels=[KERNEL, OTHER],
            source=base.target.source,
        )
        other = TritonKernel(name=OTHER, source=target.source, launch_line=9, launch_site="...")
        segment = base.segment.model_copy(
            update={"kernels": [*base.segment.kernels, other], "targets": [target]}
        )
        facts = build_facts(base.compiled, segment, target, triage({KERNEL: 0.02, OTHER: 0.03}))
        inp = base.model_copy(
            update={
                "target": target,
                "segment": segment,
                "facts": facts,
                "params": SearchParams(iterations=1, plans=2, retries=2, beam=1),
                "proposer": proposer(llm),
                "use_llm": True,
            }
        )
        result, _ = await run_search(env, inp, gpu)
        timing = [r.text for r in llm.requests if "Make it faster" in r.text]
        fused = executor_requests(llm, "fuse all")[0]
        unused = llm.unused()

    assert unused == []
    assert gpu.profile_inputs[0].kernel_times == {OTHER: 0.03, KERNEL: 0.02}
    assert f"### `{OTHER}`: 30.00 us per forward (dominant: the most GPU time)" in fused
    assert len(timing) == 1
    assert "Your module is correct, 0.909x: slower" in timing[0]
    assert "the whole forward with your kernel in place: 1.1 ms vs the baseline's 1 ms" in timing[0]
    assert "The 1.030x needed is for the whole forward" in timing[0]  # a new run: 3 decimals
    by_id = {d.candidate.id: d for d in result.decisions if not d.retime}
    assert sorted(by_id) == ["forward:i0-s0-p0-a0", "forward:i0-s0-p0-a1", "forward:i0-s0-p1-a0"]
    assert by_id["forward:i0-s0-p0-a1"].accepted
    assert by_id["forward:i0-s0-p0-a1"].speedup == pytest.approx(1 / 1.05)
    assert by_id["forward:i0-s0-p1-a0"].speedup == pytest.approx(2.0)  # fast: no timing retry
    assert result.best_kernel_speedup == pytest.approx(2.0)
