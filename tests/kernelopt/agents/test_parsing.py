"""Reply parsing: good replies become typed values, junk is rejected with a reason."""

from __future__ import annotations

import pytest

from kernelopt.agents.parsing import (
    extract_json,
    parse_decline,
    parse_experiences,
    parse_kernel_reply,
    parse_plans,
)
from kernelopt.errors import LLMReplyError
from tests.support.candidate_sources import relu_kernel

KERNEL = relu_kernel("_body", 1024)


def test_plans_from_a_fenced_json_reply_with_prose_around_it():
    reply = (
        "Here are my ideas.\n```json\n"
        '{"plans": [{"direction": "Vectorize loads", "description": "Use 128-bit loads."},'
        ' {"direction": "split reduction", "description": "Two-stage   sum."}]}\n```\nGood luck.'
    )
    plans = parse_plans(reply, max_plans=4)
    assert [p.direction for p in plans] == ["Vectorize loads", "split reduction"]
    assert plans[1].description == "Two-stage sum."


def test_plans_accept_a_bare_list_and_cap_at_max():
    reply = '[{"direction": "a", "description": "x"}, {"direction": "b", "description": "y"}, {"direction": "c", "description": "z"}]'
    assert [p.direction for p in parse_plans(reply, max_plans=2)] == ["a", "b"]


def test_plans_drop_banned_and_repeated_directions():
    reply = (
        '{"plans": [{"direction": "Tune block", "description": "x"},'
        ' {"direction": "vectorize", "description": "y"}, {"direction": "VECTORIZE", "description": "z"}]}'
    )
    plans = parse_plans(reply, 4, banned=["tune-block"])
    assert [p.direction for p in plans] == ["vectorize"]


def test_a_planner_may_decline_with_a_reason_and_only_so():
    why = "The kernel runs at 90% of the bandwidth; 1.2x would need fewer bytes."
    assert parse_decline('```json\n{"plans": [], "no_plan": "  ' + why + '  "}\n```') == why
    assert parse_decline('{"no_plan": "' + why + '"}') == why
    long = parse_decline('{"plans": [], "no_plan": "' + "x" * 1000 + '"}')
    assert len(long) == 400 and long.endswith("...")
    # plans beside it, an empty reason, or no JSON: not a decline (parse_plans decides)
    assert (
        parse_decline('{"plans": [{"direction": "a", "description": "b"}], "no_plan": "w"}') == ""
    )
    assert parse_decline('{"plans": [], "no_plan": " "}') == ""
    assert parse_decline('{"plans": []}') == ""
    assert parse_decline("no idea") == ""
    with pytest.raises(LLMReplyError, match="proposes no plans"):
        parse_plans('{"plans": []}', 2)


@pytest.mark.parametrize(
    ("reply", "needle"),
    [
        ("", "empty"),
        ("I think you should vectorize.", "no valid JSON"),
        ('{"ideas": []}', 'no "plans" list'),
        ('{"plans": []}', "no plans"),
        ('{"plans": "vectorize"}', "must be a JSON list"),
        ('{"plans": [{"direction": "", "description": "x"}]}', '"direction" must be a non-empty'),
        ('{"plans": [{"direction": "a"}]}', '"description" must be a non-empty'),
        ('{"plans": [42]}', "must be a JSON object"),
        ('{"plans": [{"direction": "' + "x" * 200 + '", "description": "d"}]}', "longer than"),
        ('{"plans": [{"direction": "tune block", "description": "d"}]}', "banned or repeated"),
    ],
)
def test_malformed_plan_replies_are_rejected_with_a_reason(reply, needle):
    with pytest.raises(LLMReplyError, match=needle):
        parse_plans(reply, 4, banned=["tune block"])


def test_json_extraction_copes_with_braces_inside_strings():
    text = 'prefix {"plans": [{"direction": "use {braces}", "description": "a \\"quoted\\" }"}]} suffix'
    value = extract_json(text)
    assert value["plans"][0]["direction"] == "use {braces}"


def test_kernel_reply_takes_the_last_triton_block():
    reply = (
        "First a sketch:\n```python\nprint('not a kernel')\n```\n"
        f"Final version:\n```python\n{KERNEL}```\n"
    )
    assert parse_kernel_reply(reply, ["launch"]) == KERNEL


@pytest.mark.parametrize(
    ("reply", "needle"),
    [
        ("", "empty"),
        ("Sorry, I cannot help with that.", "no ```python code block"),
        ("```python\nimport torch\nx = 1\n```", "no ```python block defines a @triton.jit"),
        ("```python\n@triton.jit\ndef k(x:\n    pass\n```", "does not parse: line"),
        (
            f"```python\n{KERNEL.replace('def launch', 'def run_it')}```",
            "none of the required entry points",
        ),
    ],
)
def test_malformed_kernel_replies_are_rejected_with_a_reason(reply, needle):
    with pytest.raises(LLMReplyError, match=needle):
        parse_kernel_reply(reply, ["launch", "triton_poi_fused_relu_0"])


def test_kernel_reply_accepts_the_inductor_form_entry_point():
    src = KERNEL.replace("def launch(x, y, n):\n    _body", "def helper(x, y, n):\n    _body")
    src = src.replace("def _body(", "def triton_poi_fused_relu_0(").replace(
        "_body[", "triton_poi_fused_relu_0["
    )
    reply = f"```py\n{src}```"
    assert "def triton_poi_fused_relu_0(" in parse_kernel_reply(
        reply, ["triton_poi_fused_relu_0", "launch"]
    )


def test_experiences_parse_and_normalise_tags():
    reply = (
        '{"entries": [{"situation": "pointwise, memory bound", "action": "XBLOCK=2048, 8 warps",'
        ' "effect": "1.12x", "tags": ["Kind/Pointwise", " bottleneck/memory_bound "]}]}'
    )
    (entry,) = parse_experiences(reply)
    assert entry.tags == ["kind/pointwise", "bottleneck/memory_bound"]
    assert entry.effect == "1.12x"
    assert parse_experiences('{"entries": []}') == []


@pytest.mark.parametrize(
    ("reply", "needle"),
    [
        ('{"entries": [{"situation": "s"}]}', '"action" must be a non-empty'),
        ('{"entries": [{"situation": "s", "action": "a", "tags": "x"}]}', "list of strings"),
        (
            '{"entries": [{"situation": "s", "action": "a", "effect": 3}]}',
            '"effect" must be a string',
        ),
        ("no json here", "no valid JSON"),
    ],
)
def test_malformed_experience_replies_are_rejected(reply, needle):
    with pytest.raises(LLMReplyError, match=needle):
        parse_experiences(reply)
