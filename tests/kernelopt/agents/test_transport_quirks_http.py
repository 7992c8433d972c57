"""The transport against a scripted endpoint that behaves like reasoning models (issue 29, 4).

Real ``openai`` client, real HTTP: the server refuses ``max_tokens`` or
``temperature`` with OpenAI's HTTP 400, cuts replies at the output limit,
wraps them in ``<think>`` blocks; the planner gets one retry after a reply it
cannot parse.
"""

from __future__ import annotations

import json

import pytest

from activities import search_activities
from kernelopt.agents import quirks, roles
from kernelopt.agents.plan_retry import planner_transport
from kernelopt.agents.transport import TRUNCATED_NOTE, ChatTransport
from kernelopt.config import Settings
from kernelopt.contracts.compiled import SearchTarget, TargetKind
from kernelopt.contracts.search import ExecuteInput, Plan, PlanInput, ProposerConfig
from kernelopt.errors import KernelOptError
from kernelopt.store import open_store
from tests.kernelopt.agents.test_roles_http import GOOD
from tests.support.scripted_openai import Reply, ScriptedOpenAI, plans_json

MAX_TOKENS_400 = (
    "Unsupported parameter: 'max_tokens' is not supported with this model. "
    "Use 'max_completion_tokens' instead."
)
TEMPERATURE_400 = (
    "Unsupported value: 'temperature' does not support 0.7 with this model. "
    "Only the default (1) value is supported."
)
KERNEL = GOOD
DRAFT = GOOD.replace("tl.maximum(", "DRAFT_ONLY(")


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("KERNELOPT_HOME", str(tmp_path / "home"))
    quirks.forget_memory()
    yield tmp_path / "home"
    quirks.forget_memory()


def config(server: ScriptedOpenAI, **kw) -> ProposerConfig:
    return ProposerConfig(
        base_url=server.base_url, model="reasoner", api_key_env="KERNELOPT_TEST_NO_KEY", **kw
    )


async def ask(cfg: ProposerConfig, home, text: str = "hi"):
    transport = ChatTransport(cfg, home=home)
    try:
        return await transport.complete([{"role": "user", "content": text}])
    finally:
        await transport.close()


async def test_max_tokens_and_temperature_learned_from_400s_and_remembered(home):
    with ScriptedOpenAI(
        reject_params={"max_tokens": MAX_TOKENS_400, "temperature": TEMPERATURE_400}
    ) as server:
        server.add(Reply(content="ok", repeat=True))
        cfg = config(server, max_output_tokens=1234)
        reply = await ask(cfg, home)
        assert reply.text == "ok"
        first = [r.body for r in server.requests]
        # refused twice (each parameter named once), then accepted without both
        assert [("max_tokens" in b, "temperature" in b) for b in first] == [
            (True, True),
            (False, True),
            (False, False),
        ]
        assert first[-1]["max_completion_tokens"] == 1234
        # a new transport in this process: no refused request at all
        await ask(cfg, home)
        assert len(server.requests) == 4
        # a restarted worker (memory gone) reads what was learned from $KERNELOPT_HOME
        quirks.forget_memory()
        saved = json.loads((home / "llm" / quirks.QUIRKS_FILE).read_text())
        assert saved[quirks.key_of(server.base_url, "reasoner")] == {
            "max_completion_tokens": True,
            "no_temperature": True,
        }
        await ask(cfg, home)
        assert len(server.requests) == 5
        last = server.requests[-1].body
        assert "max_tokens" not in last and "temperature" not in last
        # another model on the same endpoint learns for itself
        other = cfg.model_copy(update={"model": "plain"})
        server.reject_params.clear()
        await ask(other, home)
        assert server.requests[-1].body["max_tokens"] == 1234
        assert server.requests[-1].body["temperature"] == 0.7


async def test_a_400_about_something_else_is_still_a_configuration_error(home):
    from kernelopt.agents.transport import LLMConfigError

    with ScriptedOpenAI() as server:
        server.add(Reply(status=400, content="Invalid 'messages[0].role': bogus."))
        with pytest.raises(LLMConfigError, match="bogus"):
            await ask(config(server), home)
        assert len(server.requests) == 1


async def test_truncated_reply_is_continued_and_joined(home):
    head, tail = KERNEL[:30], KERNEL[30:]
    with ScriptedOpenAI() as server:
        server.add(
            Reply(match="cut off at the output limit", content=tail, completion_tokens=20),
            Reply(content=head, finish_reason="length", completion_tokens=64),
        )
        reply = await ask(config(server, max_output_tokens=64), home)
        assert reply.text == KERNEL
        assert reply.finish_reason == "stop"
        assert reply.usage.completion_tokens == 84 and reply.usage.calls == 2
        follow = server.requests[1].messages
        assert follow[-2] == {"role": "assistant", "content": head}
        assert follow[-1]["content"] == TRUNCATED_NOTE.format(limit=64)


async def test_a_shortened_answer_replaces_the_truncated_one(home):
    with ScriptedOpenAI() as server:
        server.add(
            Reply(match="cut off at the output limit", content=KERNEL),
            Reply(
                content="```python\ndef launch(x, y, n):\n    # a very long", finish_reason="length"
            ),
        )
        reply = await ask(config(server), home)
        assert reply.text == KERNEL


async def test_think_blocks_are_stripped_before_parsing(home):
    store = open_store(home / "artifacts")
    src = store.put_text("def k(): pass\n", name="k.py")
    target = SearchTarget(id="k0", kind=TargetKind.FUSION_GROUP)
    with ScriptedOpenAI() as server:
        server.add(
            Reply(
                content="<think>\nA first draft:\n"
                + DRAFT
                + "\nNo, use tl.maximum.\n</think>\n"
                + KERNEL
            )
        )
        inp = ExecuteInput(
            target=target,
            state_source=src,
            plan=Plan(direction="copy", description="copy"),
            proposer=config(server),
            candidate_id="k0:c",
        )
        transport = ChatTransport(inp.proposer, home=home)
        try:
            result = await roles.execute(inp, store, transport)
        finally:
            await transport.close()
    assert result.error == ""
    assert "tl.maximum(" in store.get_text(result.source)
    assert "DRAFT_ONLY" not in store.get_text(result.source)
    assert "<think>" not in store.get_text(result.reply)


async def test_planner_retry_continues_the_conversation_with_the_parse_error(home):
    store = open_store(home / "artifacts")
    src = store.put_text("def k(): pass\n", name="k.py")
    good = plans_json(("bigger blocks", "XBLOCK 2048"))
    with ScriptedOpenAI() as server:
        server.add(
            Reply(match="could not be used", content=good),
            Reply(content="Here are my plans: bigger blocks, and vectorize."),
        )
        inp = PlanInput(
            target=SearchTarget(id="k0", kind=TargetKind.FUSION_GROUP),
            state_source=src,
            proposer=config(server),
            plans=2,
        )
        first = await search_activities.plan(inp)
        assert first.plans == [] and first.error
        retry = inp.model_copy(update={"parse_retry": first.reply, "parse_error": first.error})
        second = await search_activities.plan(retry)
    assert [p.direction for p in second.plans] == ["bigger blocks"]
    sent = server.requests[1].messages
    assert sent[-2]["content"] == "Here are my plans: bigger blocks, and vectorize."
    assert first.error in sent[-1]["content"]
    assert sent[:-2] == server.requests[0].messages  # the same prompt, two turns longer
    assert planner_transport(inp, store, object()) is not None


def test_settings_carry_the_output_limit(monkeypatch, tmp_path):
    from kernelopt.cli.llm_replies import proposer_fields

    monkeypatch.setenv("KERNELOPT_LLM_MAX_OUTPUT_TOKENS", "32000")
    monkeypatch.setenv("KERNELOPT_LLM_MODE", "folder")
    fields = proposer_fields(Settings.from_env(home=tmp_path))
    assert ProposerConfig(**fields).max_output_tokens == 32000
    assert fields["mode"] == "folder"
    monkeypatch.setenv("KERNELOPT_LLM_MODE", "bogus")
    with pytest.raises(KernelOptError, match="expected one of sync, batch, folder"):
        proposer_fields(Settings.from_env(home=tmp_path))
