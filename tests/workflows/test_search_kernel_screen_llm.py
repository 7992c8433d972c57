"""Two tiers in an LLM round, on the real Temporal dev server and a scripted HTTP endpoint.

The planner, executor, retry-fix and summarizer are the real activities talking
over HTTP to a scripted OpenAI-compatible server; gate_candidate, profile and
screening are the search tests' doubles (the screening double's smoke check
fails exactly the kernels the gate double rejects, and its estimate is the
gate's number).  The history replays.
"""

from __future__ import annotations

import uuid

from kernelopt.contracts.screening import SCREENED_OUT, ScreenParams
from kernelopt.contracts.search import ProposerConfig, SearchParams
from tests.support.scripted_openai import Reply, ScriptedOpenAI, executor, planner, summarizer
from tests.workflows.test_search_kernel import Gpu, kernel_reply, run_search, search_input

SCREENED_REASON = "screened out as slower by an untrusted estimate"


def _script(llm: ScriptedOpenAI) -> None:
    llm.add(
        planner(
            3,
            ("bigger blocks", "XBLOCK 2048"),
            ("vectorize loads", "128-bit loads"),
            ("fewer warps", "2 warps"),
        ),
        # the retry-fix request carries the gate's feedback on the wrong kernel
        Reply(match="wrong values PLUGH", content=kernel_reply("MS=0.8", "fixed")),
        # only when gated: the slow kernel is told its timing, and answers no faster
        Reply(match="slower than the baseline", content=kernel_reply("MS=1.6", "again")),
        executor("vectorize loads", content=kernel_reply("WRONG")),
        executor("bigger blocks", content=kernel_reply("MS=0.5")),
        executor("fewer warps", content=kernel_reply("MS=1.6")),
        summarizer(),
    )


def _input(store, llm: ScriptedOpenAI, screen: ScreenParams):
    return search_input(
        store,
        f"screen-llm-{uuid.uuid4().hex[:6]}",
        params=SearchParams(iterations=1, plans=3, retries=1, beam=1, screen=screen),
        proposer=ProposerConfig(
            base_url=llm.base_url, model="scripted-model", api_key_env="NO_KEY_HERE"
        ),
        use_llm=True,
    )


async def test_an_llm_round_gates_smoke_failures_and_screens_out_a_slow_correct_kernel(env, store):
    gpu = Gpu()
    with ScriptedOpenAI() as llm:
        _script(llm)
        result, _ = await run_search(env, _input(store, llm, ScreenParams()), gpu)
        summary = next(r for r in llm.requests if "Outcomes, one line" in r.text)
    assert result.stopped_reason == "completed 1 iterations"
    by_plan = {}
    for d in result.decisions:
        if not d.retime:
            by_plan.setdefault(d.candidate.plan.direction, []).append(d)
    # one screening of the three first attempts; the retry-fix attempt was not screened
    assert len(gpu.screened) == 1 and len(gpu.screened[0]) == 3
    assert all(cid.endswith("a0") for cid in gpu.screened[0])
    # the kernel that failed the smoke check still reached the gates and got its fix loop
    wrong, fixed = by_plan["vectorize loads"]
    assert wrong.candidate.id in gpu.gated and wrong.deciding_gate == "correctness"
    assert not wrong.screening.smoke_ok and wrong.screening.selected
    assert "gated for its feedback" in wrong.screening.why
    assert fixed.candidate.attempt == 1 and fixed.accepted and fixed.screening is None
    assert fixed.candidate.id in gpu.gated
    # the slow, correct kernel (0.625x by its estimate, the bar is the root's 1.0x) was not
    [slow] = by_plan["fewer warps"]
    assert slow.deciding_gate == SCREENED_OUT and slow.candidate.id not in gpu.gated
    assert slow.reason.startswith(SCREENED_REASON) and "below the best so far" in slow.reason
    assert slow.verdicts == [] and slow.speedup is None and not slow.accepted
    assert slow.screening.untrusted and slow.screening.smoke_ok
    # the fast one went through the cascade, and its result is the cascade's number
    [fast] = by_plan["bigger blocks"]
    assert fast.accepted and fast.candidate.id in gpu.gated and fast.screening.selected
    assert result.best_kernel_speedup == 2.0
    assert result.candidates_tried == 4
    # the agent hears of it: the summarizer's outcomes carry the screened-out reason
    assert f"fewer warps: rejected at {SCREENED_OUT}: {SCREENED_REASON}" in summary.text


async def test_with_screening_off_an_llm_round_gates_every_candidate(env, store):
    gpu = Gpu()
    with ScriptedOpenAI() as llm:
        _script(llm)
        result, _ = await run_search(env, _input(store, llm, ScreenParams(enabled=False)), gpu)
    tried = [d for d in result.decisions if not d.retime]
    # the slow kernel was gated, accepted, and went back for its one retry after timing
    assert gpu.screened == [] and len(tried) == 5
    assert sorted(c for c in gpu.gated if not c.endswith(":retime")) == sorted(
        d.candidate.id for d in tried
    )
    assert all(d.screening is None and d.deciding_gate != SCREENED_OUT for d in tried)
