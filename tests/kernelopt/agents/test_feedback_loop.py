"""Issue 29 points 3 and 6 (agents layer): timing feedback, siblings, memory, plan dedupe,
merged failures with hints only where they apply, and tolerant reply parsing."""

from __future__ import annotations

import pytest

from kernelopt.agents.parsing import extract_json, parse_kernel_reply, parse_plans
from kernelopt.agents.plans import dedupe_plans
from kernelopt.agents.result_text import (
    HOLDOUT_HINT,
    merge_failures,
    render_verdict_feedback,
    sibling_lines,
    timing_feedback,
)
from kernelopt.contracts.search import Decision, Plan
from kernelopt.contracts.verdicts import GateName, GateStatus, GateVerdict
from tests.support.decisions import root_decision

GATE_HINT = (
    " This is a held-out input shape (another batch size than get_inputs()): "
    "read sizes from the tensors instead of hard-coding them."
)


def _bullet(names: str, err: str, hint: bool = False) -> str:
    text = f"input shapes [[4, 8]]: 3 of 32 elements are outside tolerance; largest error {err}."
    return f"- call {names}: {text}" + (GATE_HINT if hint else "")


def test_near_identical_failures_merge_and_the_holdout_hint_goes_when_base_inputs_fail():
    feedback = "\n".join(
        [
            "Your candidate produced wrong results:",
            _bullet("seed0", "4.7e-04"),
            _bullet("seed1", "5.1e-04"),
            _bullet("holdout0", "4.9e-04", hint=True),
        ]
    )
    merged = merge_failures(feedback)
    lines = merged.splitlines()
    assert lines[0] == "Your candidate produced wrong results:"
    assert len(lines) == 2
    assert lines[1].startswith("- calls seed0, seed1, holdout0:")
    assert "4.7e-04" in lines[1] and "2 more like it" in lines[1]
    assert "hard-coding" not in merged and HOLDOUT_HINT not in merged


def test_the_holdout_hint_stays_when_only_held_out_inputs_fail():
    feedback = "\n".join([_bullet("holdout0", "1e-2", hint=True), _bullet("heldout", "2e-2")])
    merged = merge_failures(feedback)
    assert merged.count(HOLDOUT_HINT) == 1 and len(merged.splitlines()) == 1


def test_different_failures_stay_apart():
    feedback = (
        _bullet("seed0", "1e-3") + "\n- call seed1: 5 inf/NaN values where the reference is finite."
    )
    assert len(merge_failures(feedback).splitlines()) == 2


def test_verdict_feedback_uses_the_merged_lines():
    verdict = GateVerdict(
        gate=GateName.CORRECTNESS,
        status=GateStatus.FAIL,
        reason="wrong results",
        feedback=_bullet("seed0", "1e-3") + "\n" + _bullet("seed1", "2e-3"),
    )
    text = render_verdict_feedback([verdict])
    assert text.count("- call") == 1 and "seed0, seed1" in text


def _decision(
    speedup: float | None, accepted: bool = True, direction: str = "tile", **kw
) -> Decision:
    return root_decision(direction, accepted=accepted, speedup=speedup, **kw)


@pytest.mark.parametrize(
    ("speedup", "words"),
    [
        (0.93, "correct, 0.930x: slower than the baseline"),
        (1.01, "below the 1.03x needed"),
        (1.2, "1.200x: faster than the baseline."),
    ],
)
def test_timing_feedback_says_how_fast(speedup, words):
    text = timing_feedback(_decision(speedup, kernel_ms=0.1075, baseline_kernel_ms=0.1))
    assert words in text
    assert (
        "the whole forward with your kernel in place: 107.5 us vs the baseline's 100.0 us" in text
    )


def test_timing_feedback_computes_the_speedup_from_times_when_missing():
    assert "0.500x" in timing_feedback(_decision(None, kernel_ms=0.2, baseline_kernel_ms=0.1))
    assert "could not be measured" in timing_feedback(_decision(None))


def test_sibling_lines_merge_repeats_and_leave_out_the_own_plan():
    rejected = _decision(
        None,
        accepted=False,
        direction="vectorize",
        deciding_gate="correctness",
        reason="wrong results",
    )
    decisions = [
        rejected,
        rejected,
        _decision(1.1, direction="split-k"),
        _decision(1.0, direction="own"),
    ]
    lines = sibling_lines(decisions, exclude_plan="own")
    assert len(lines) == 2
    assert "vectorize" in lines[0] and "(x2)" in lines[0] and "correctness" in lines[0]
    assert "split-k" in lines[1] and "1.100x" in lines[1]


def test_duplicate_plans_drop_before_code_is_written():
    tried = [Plan(direction="Vectorize loads", description="use 128-bit loads of the input rows")]
    plans = [
        Plan(direction="vectorize-loads", description="something else entirely"),
        Plan(direction="wider loads", description="Use 128-bit loads of the input rows."),
        Plan(direction="split reduction", description="two-stage reduction over row blocks"),
        Plan(direction="split the reduction", description="a two-stage reduction over row blocks"),
    ]
    kept, dropped = dedupe_plans(plans, tried)
    assert [p.direction for p in kept] == ["split reduction"]
    assert len(dropped) == 3


def test_think_blocks_tolerant_json_and_every_fence_are_read():
    reply = '<think>maybe {"plans": []}</think>\n```json\n{"plans": [{"direction": "a", "description": "b",},],}\n```'
    assert parse_plans(reply, 4)[0].direction == "a"
    assert extract_json("prose [1] then {'plans': [], 'ok': True}") == {"plans": [], "ok": True}
    module = (
        "import triton\n\n@triton.jit\ndef k(x):\n    pass\n\n\ndef launch(x):\n    k[(1,)](x)\n"
    )
    broken = "@triton.jit\ndef launch(:\n"
    reply = f"~~~python3\n{module}~~~\n\nand a second try:\n```python\n{broken}```\n"
    assert parse_kernel_reply(reply, ["launch"]) == module  # the broken last block is skipped
    # a final block without its closing fence counts when the module in it is whole ...
    assert parse_kernel_reply(f"Here it is.\n```python\n{module}", ["launch"]) == module
    # ... and a reply cut short mid-module says so
    with pytest.raises(Exception, match=r"(?s)does not parse.*cut short"):
        parse_kernel_reply(f"```python\n{module}    k[(1,)](x,", ["launch"])
    with pytest.raises(Exception, match=r"(?s)launch.*cut short"):
        parse_kernel_reply(
            "```python\nimport triton\n\n@triton.jit\ndef k(x):\n    pass\n", ["launch"]
        )


def test_timing_feedback_prints_gamma_with_the_speedup_s_decimals():
    # run 1 read "1.03x ... below the 1.03x needed"; since the patch both have 3 decimals
    decision = _decision(1.028, kernel_ms=0.1, baseline_kernel_ms=0.1028)
    text = timing_feedback(decision, 1.03, digits=3)
    assert "correct, 1.028x: faster than the baseline, but below the 1.030x needed" in text
    assert "The 1.030x needed is for the whole forward" in text
    assert "below the 1.03x needed" in timing_feedback(decision, 1.03)  # recorded histories
