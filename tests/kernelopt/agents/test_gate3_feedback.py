"""Gate-3 (float64) feedback as the retry-fix reads it: one line per kind, no size hint."""

from __future__ import annotations

from kernelopt.agents.result_text import HOLDOUT_HINT, render_verdict_feedback
from kernelopt.contracts.verdicts import GateName, GateStatus, GateVerdict


def _verdict(gate: GateName, names: list[str]) -> GateVerdict:
    lines = ["Precision check failed:"] + [
        f"- call {n}: off by {4.7 + i:.1f}e-04 against float64 where the fp32 reference is "
        f"off by 2.8e-07 (ratio {1.6 + i:.1f}e+03 > 10)."
        for i, n in enumerate(names)
    ]
    return GateVerdict(gate=gate, status=GateStatus.FAIL, reason="x", feedback="\n".join(lines))


def test_held_out_sets_failing_gate_3_get_one_line_and_no_size_hint():
    text = render_verdict_feedback([_verdict(GateName.MODEL, ["heldout", "holdout0"])])
    bullets = [line for line in text.splitlines() if line.startswith("- ")]
    assert bullets == [
        "- calls heldout, holdout0: off by 4.7e-04 against float64 where the fp32 reference is "
        "off by 2.8e-07 (ratio 1.6e+03 > 10). (and 1 more like it, numbers differ)"
    ]
    assert HOLDOUT_HINT not in text
    # the same lines at gate 2 do get the hint: only sizes can make held-out sets alone fail
    assert HOLDOUT_HINT in render_verdict_feedback(
        [_verdict(GateName.CORRECTNESS, ["heldout", "holdout0"])]
    )
