"""The agents against a scripted OpenAI-compatible server: real client, real HTTP, real parsing."""

from __future__ import annotations

import json

import pytest

from kernelopt.agents import ledger, roles
from kernelopt.agents.transport import ChatTransport, LLMConfigError, make_client
from kernelopt.contracts.compiled import SearchTarget, TargetKind
from kernelopt.contracts.search import (
    Analysis,
    Bottleneck,
    Candidate,
    Decision,
    ExecuteInput,
    KernelProfile,
    LedgerEntry,
    Plan,
    PlanInput,
    ProfileResult,
    ProposerConfig,
    SummarizeInput,
    Usage,
)
from kernelopt.contracts.verdicts import GateName, GateStatus, GateVerdict
from kernelopt.errors import InfrastructureError
from kernelopt.memory import ExperienceMemory
from kernelopt.store import open_store
from tests.support.candidate_sources import relu_kernel
from tests.support.scripted_openai import Reply, ScriptedOpenAI, planner

KERNEL_NAME = "triton_poi_fused_relu_0"
GOOD = f"```python\n{relu_kernel('_relu', 2048)}```"
BROKEN = GOOD.replace("def launch(x, y, n):", "def launch(x, y, n)")  # syntax error


@pytest.fixture
def store(tmp_path):
    return open_store(tmp_path / "artifacts")


@pytest.fixture
def server():
    with ScriptedOpenAI() as srv:
        yield srv


def config(server: ScriptedOpenAI, **kw) -> ProposerConfig:
    return ProposerConfig(
        base_url=server.base_url,
        model="scripted-model",
        api_key_env="KERNELOPT_TEST_NO_SUCH_KEY",
        usd_per_mtok_in=3.0,
        usd_per_mtok_out=15.0,
        **kw,
    )


def target() -> SearchTarget:
    return SearchTarget(id="k0", kind=TargetKind.KERNEL, kernels=[KERNEL_NAME])


def profile() -> ProfileResult:
    return ProfileResult(
        profile=KernelProfile(
            source="ncu",
            duration_us=12.5,
            sol_compute_pct=11.0,
            sol_memory_pct=71.0,
            top_rules=["[Memory Workload Analysis] uncoalesced global loads (est. speedup 40%)"],
        ),
        analysis=Analysis(bottleneck=Bottleneck.MEMORY_BOUND, reasoning="memory is the limiter"),
    )


async def test_planner_round_trip_with_usage_cost_and_stored_prompt(server, store):
    server.add(
        planner(
            2,
            ("vectorize loads", "128-bit loads"),
            ("bigger blocks", "XBLOCK 2048"),
            prompt_tokens=1200,
            completion_tokens=300,
        )
    )
    src = store.put_text("def k(): pass\n", name="k.py")
    inp = PlanInput(
        target=target(),
        state_source=src,
        profile=profile(),
        plans=2,
        proposer=config(server),
        banned_directions=["tune block"],
        experience="- When pointwise: use XBLOCK=1024",
    )
    with_transport = ChatTransport(inp.proposer)
    try:
        result = await roles.plan(inp, store, with_transport)
    finally:
        await with_transport.close()
    assert [p.direction for p in result.plans] == ["vectorize loads", "bigger blocks"]
    assert result.error == ""
    assert result.usage == Usage(
        prompt_tokens=1200, completion_tokens=300, usd=(1200 * 3.0 + 300 * 15.0) / 1e6, calls=1
    )
    (request,) = server.requests
    assert request.model == "scripted-model"
    assert request.body["temperature"] == pytest.approx(0.7)
    text = request.text
    assert "SOL compute: 11.0%, SOL memory: 71.0%" in text
    assert "memory_bound: memory is the limiter" in text
    assert "Do NOT propose these directions again" in text and "tune block" in text
    assert "use XBLOCK=1024" in text
    stored = json.loads(store.get_text(result.prompt))
    assert stored[1]["content"] == request.messages[1]["content"]
    assert "vectorize loads" in store.get_text(result.reply)


async def test_malformed_planner_reply_is_a_result_with_usage(server, store):
    server.add(
        Reply(content="Let me think about it... vectorize!", prompt_tokens=10, completion_tokens=5)
    )
    inp = PlanInput(target=target(), state_source=store.put_text("x"), proposer=config(server))
    transport = ChatTransport(inp.proposer)
    result = await roles.plan(inp, store, transport)
    await transport.close()
    assert result.plans == []
    assert "no valid JSON" in result.error
    assert result.usage.total_tokens == 15


async def test_a_planner_that_declines_says_why_and_is_no_error(server, store):
    server.add(
        Reply(
            content='{"plans": [], "no_plan": "At 90% of the bandwidth; 1.2x needs fewer bytes."}',
            prompt_tokens=10,
            completion_tokens=5,
        )
    )
    inp = PlanInput(target=target(), state_source=store.put_text("x"), proposer=config(server))
    transport = ChatTransport(inp.proposer)
    result = await roles.plan(inp, store, transport)
    await transport.close()
    assert (result.plans, result.error) == ([], "")
    assert result.declined == "At 90% of the bandwidth; 1.2x needs fewer bytes."
    assert result.usage.total_tokens == 15 and result.reply is not None
    assert '"no_plan"' in server.requests[0].messages[0]["content"]  # the option is offered


async def test_retry_fix_loop_fixes_a_module_that_does_not_parse(server, store):
    """Attempt 0 fails to compile (syntax); its error goes back in the same conversation."""
    server.add(
        Reply(match="Write the complete replacement module", content=BROKEN, completion_tokens=400),
        Reply(match="does not parse", content="Fixed:\n" + GOOD, completion_tokens=420),
    )
    proposer = config(server)
    first = ExecuteInput(
        target=target(),
        state_source=store.put_text("@triton.jit\ndef triton_poi_fused_relu_0(): pass\n"),
        plan=Plan(direction="bigger blocks", description="XBLOCK 2048"),
        proposer=proposer,
        candidate_id="k0:i0-s0-p0-a0",
    )
    transport = ChatTransport(proposer)
    r0 = await roles.execute(first, store, transport)
    assert r0.source is None
    assert "does not parse: line" in r0.error
    fix = first.model_copy(
        update={
            "conversation": r0.conversation,
            "feedback": r0.error,
            "attempt": 1,
            "candidate_id": "k0:i0-s0-p0-a1",
        }
    )
    r1 = await roles.retry_fix(fix, store, transport)
    await transport.close()
    assert r1.error == ""
    assert "def launch(x, y, n):" in store.get_text(r1.source)
    conversation = json.loads(store.get_text(r1.conversation))
    assert [m["role"] for m in conversation] == ["system", "user", "assistant", "user", "assistant"]
    assert conversation[2]["content"] == BROKEN  # the broken attempt stays in the conversation
    assert "does not parse" in conversation[3]["content"]
    # the contract text in the system prompt is the compile helper's (or our default)
    assert "launch(*args)" in conversation[0]["content"]
    assert ledger.total([r0.usage, r1.usage]).completion_tokens == 820
    assert len(server.requests) == 2 and not server.unused()


async def test_retry_fix_renders_the_gate_verdict_feedback(server, store):
    server.add(Reply(match="Gate `correctness` said fail", content=GOOD))
    proposer = config(server)
    conversation = store.put_text(
        json.dumps(
            [
                {"role": "system", "content": "s"},
                {"role": "user", "content": "u"},
                {"role": "assistant", "content": GOOD},
            ]
        )
    )
    verdict = GateVerdict(
        gate=GateName.CORRECTNESS,
        status=GateStatus.FAIL,
        reason="seed 1: max abs error 0.31 > atol 1e-3",
        feedback="output[0] differs at index (3, 17): got 0.0, want 0.31",
        metrics={"max_abs_err": 0.31},
    )
    inp = ExecuteInput(
        target=target(),
        state_source=store.put_text("x"),
        plan=Plan(direction="d", description="d"),
        proposer=proposer,
        conversation=conversation,
        verdicts=[verdict],
        attempt=1,
    )
    transport = ChatTransport(proposer)
    result = await roles.retry_fix(inp, store, transport)
    await transport.close()
    assert result.source is not None
    sent = server.requests[0].messages[-1]["content"]
    assert "seed 1: max abs error 0.31" in sent
    assert "got 0.0, want 0.31" in sent
    assert "max_abs_err=0.31" in sent


async def test_summarizer_entries_go_into_campaign_memory(server, store):
    server.add(
        Reply(
            match="iteration 2",
            content='{"entries": [{"situation": "pointwise kernel, memory bound", "action": "XBLOCK=2048 with 8 warps",'
            ' "effect": "1.10x", "tags": ["direction/launch-config"]}]}',
        )
    )
    # the candidate's own reply: a retry that says what it kept and what it dropped
    reply = "This version drops TMA and keeps 2048-wide blocks.\n```python\nx = 1\n```\nDone."
    conversation = store.put_text(
        json.dumps([{"role": "user", "content": "u"}, {"role": "assistant", "content": reply}]),
        "application/json",
        "c.conversation.json",
    )
    cand = Candidate(
        id="c",
        target_id="k0",
        parent_id="root",
        iteration=2,
        source=None,
        plan=Plan(direction="bigger blocks", description="x"),
        conversation=conversation,
    )
    inp = SummarizeInput(
        target=target(),
        outcomes=[],
        decisions=[Decision(candidate=cand, accepted=True, reason="ok", speedup=1.1)],
        proposer=config(server),
        campaign_id="camp",
        tags=["kind/pointwise", "bottleneck/memory_bound"],
        iteration=2,
    )
    transport = ChatTransport(inp.proposer)
    result = await roles.summarize(inp, store, transport)
    await transport.close()
    assert "bigger blocks: correct, whole-forward speedup 1.100x" in server.requests[0].text
    text = server.requests[0].text
    assert "plan it was asked to follow (the planner's assumptions, unverified): x" in text
    assert (
        "what its author says it changed: This version drops TMA and keeps 2048-wide blocks. Done."
        in text
    )
    (entry,) = result.entries
    assert entry.tags == ["bottleneck/memory_bound", "direction/launch-config", "kind/pointwise"]
    memory = ExperienceMemory.load(store, result.memory)
    hits = memory.retrieve(["kind/pointwise"], "memory bound", max_tokens=200)
    assert [h.action for h in hits] == ["XBLOCK=2048 with 8 warps"]


async def test_mechanical_summary_records_only_measured_wins(store):
    def decision(label: str, accepted: bool, speedup: float | None) -> Decision:
        cand = Candidate(
            id=label, target_id="k0", parent_id="root", iteration=0, source=None, label=label
        )
        return Decision(candidate=cand, accepted=accepted, reason="", speedup=speedup)

    inp = SummarizeInput(
        target=target(),
        outcomes=[],
        decisions=[
            decision("XBLOCK=512", True, 0.9),
            decision("XBLOCK=2048", True, 1.2),
            decision("XBLOCK=4096", False, None),
        ],
        proposer=ProposerConfig(),
        use_llm=False,
        tags=["kind/pointwise", "bottleneck/memory_bound"],
    )
    result = await roles.summarize(inp, store, None)
    (entry,) = result.entries
    assert entry.action == "pin launch config XBLOCK=2048"
    assert entry.situation == "pointwise kernel, memory_bound"
    assert entry.effect.startswith("1.200x")
    losers = inp.model_copy(update={"decisions": inp.decisions[:1]})
    assert (await roles.summarize(losers, store, None)).entries == []


@pytest.mark.parametrize(
    ("status", "error"),
    [
        (401, LLMConfigError),
        (404, LLMConfigError),
        (400, LLMConfigError),
        (429, InfrastructureError),
        (500, InfrastructureError),
        (503, InfrastructureError),
    ],
)
async def test_http_failures_are_sorted_into_config_and_infrastructure(server, status, error):
    server.add(Reply(status=status, content=f"injected {status}"))
    transport = ChatTransport(config(server))
    with pytest.raises(error, match=str(status)):
        await transport.complete([{"role": "user", "content": "hi"}])
    await transport.close()
    assert len(server.requests) == 1  # max_retries=0: Temporal owns retries


async def test_unreachable_endpoint_is_infrastructure():
    transport = ChatTransport(ProposerConfig(base_url="http://127.0.0.1:9/v1", request_timeout_s=5))
    with pytest.raises(InfrastructureError, match="unavailable"):
        await transport.complete([{"role": "user", "content": "hi"}])
    await transport.close()


def test_client_has_no_retries_and_needs_a_key_or_a_local_url(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(LLMConfigError, match="no API key"):
        make_client(ProposerConfig())
    client = make_client(ProposerConfig(base_url="http://127.0.0.1:1/v1"))
    assert client.max_retries == 0
    monkeypatch.setenv("MY_KEY", "sk-test")
    assert make_client(ProposerConfig(api_key_env="MY_KEY")).api_key == "sk-test"


def test_ledger_sums_by_role_and_prices_per_million_tokens():
    cfg = ProposerConfig(usd_per_mtok_in=2.5, usd_per_mtok_out=10.0)
    assert ledger.cost_usd(cfg, 1_000_000, 100_000) == pytest.approx(3.5)
    entries = [
        LedgerEntry(role="planner", call_id="a", prompt_tokens=100, completion_tokens=10, usd=0.1),
        LedgerEntry(role="executor", call_id="b", prompt_tokens=200, completion_tokens=20, usd=0.2),
        LedgerEntry(role="planner", call_id="c", prompt_tokens=300, completion_tokens=30, usd=0.3),
    ]
    sums = ledger.by_role(entries)
    assert sums["planner"].prompt_tokens == 400 and sums["planner"].calls == 2
    assert sums["planner"].usd == pytest.approx(0.4)
    assert sums["executor"].total_tokens == 220
