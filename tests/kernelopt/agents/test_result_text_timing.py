"""What a correct candidate is told about its speed, what its siblings and the summarizer
read: labelled times (the whole forward, the kernels alone), the noise band, and whether
the difference is within it, built from gate 4's own metrics."""

from __future__ import annotations

from typing import Any

from gates.perf_verdict import timing_summary
from gates.perfstats import decide_category
from kernelopt.agents import prompts
from kernelopt.agents.result_text import (
    measurement_text,
    render_outcome,
    render_summary_outcome,
    sibling_lines,
    timing_feedback,
)
from kernelopt.contracts.search import Decision
from kernelopt.contracts.verdicts import GateName, GateStatus, GateVerdict, PerfCategory
from tests.support.decisions import root_decision

# a layernorm-sized forward: four rounds each side, as gate 4 times them (ms)
BASELINE_ROUNDS = [0.2292, 0.2301, 0.2285, 0.2310]
SLOWER_ROUNDS = [0.2464, 0.2470, 0.2455, 0.2481]  # ~7% slower, rounds agree within 1%
NOISY_ROUNDS = [0.2330, 0.2220, 0.2400, 0.2290]  # ~1% slower, rounds spread 8%


def _metrics(candidate_rounds: list[float], graphs: bool = True) -> dict[str, Any]:
    """A gate-4 verdict's metrics as ``perf_verdict`` writes them (the parts the text reads)."""
    decision = decide_category(BASELINE_ROUNDS, candidate_rounds, gamma=1.03, noise_limit=0.1)
    metrics: dict[str, Any] = {
        "baseline": {"median_ms": decision.baseline_ms, "rounds": [{"event_ms": 0.2}] * 4},
        "candidate": {"median_ms": decision.candidate_ms, "rounds": [{"event_ms": 0.2}] * 4},
        "decision": decision.as_dict(),
        "gpu_work": {"baseline_ms": 0.2101, "candidate_ms": 0.2262, "speedup": 0.2101 / 0.2262},
    }
    if graphs:
        metrics["graph_replay"] = {
            "baseline_ms": 0.06829,
            "candidate_ms": 0.07411,
            "speedup": 0.06829 / 0.07411,
        }
    return metrics


def _decision(
    metrics: dict[str, Any] | None,
    direction: str = "single-read rows",
    description: str = "Read each row once into registers and normalise from there.",
    accepted: bool = True,
    **kw: Any,
) -> Decision:
    judged = (metrics or {}).get("decision") or {}
    times = {
        "kernel_ms": judged.get("candidate_ms"),
        "baseline_kernel_ms": judged.get("baseline_ms"),
        "speedup": judged.get("speedup"),
        **kw,
    }
    return root_decision(
        direction,
        description,
        accepted=accepted,
        timing=timing_summary(metrics) if metrics else {},
        **times,
    )


def test_slower_feedback_says_what_was_timed_its_noise_and_the_kernels_alone():
    metrics = _metrics(SLOWER_ROUNDS)
    assert metrics["decision"]["category"] == PerfCategory.SLOWER.value
    text = timing_feedback(_decision(metrics))
    assert text.startswith("Your module is correct, 0.93")
    assert "slower than the baseline" in text
    assert "the whole forward with your kernel in place: 246.7 us vs the baseline's 229.7 us" in (
        text
    )
    assert "noise 0.7%" in text and "rounds give" in text and "beyond this noise" in text
    # the CUDA-graph replay: the forward's kernels alone, in the prompt's unit
    assert "kernels alone (CUDA-graph replay" in text and "74.1 us vs 68.3 us" in text
    assert "within the measurement's noise" not in text
    assert "for the whole forward" in text  # the gamma's level is named


def test_a_difference_inside_the_noise_is_called_that():
    metrics = _metrics(NOISY_ROUNDS)
    decision = metrics["decision"]
    assert decision["speedup_low"] < 1.0 < decision["speedup_high"]
    text = timing_feedback(_decision(metrics))
    assert "the difference is within this noise" in text
    assert "This difference is within the measurement's noise" in text


def test_numbers_the_verdict_lacks_are_left_out_not_made_up():
    text = timing_feedback(_decision(_metrics(SLOWER_ROUNDS, graphs=False)))
    assert "CUDA-graph" not in text
    # only the two forward times: no noise band, no within/outside claim
    bare = _decision(None, kernel_ms=0.2464, baseline_kernel_ms=0.2292, speedup=0.2292 / 0.2464)
    text = timing_feedback(bare)
    assert "the whole forward with your kernel in place: 246.4 us vs the baseline's 229.2 us" in (
        text
    )
    assert "noise" not in text.replace("measurement's noise", "")
    assert "CUDA-graph" not in text
    assert "could not be measured" in timing_feedback(_decision(None))


def test_one_round_decisions_claim_no_noise():
    metrics = _metrics(SLOWER_ROUNDS)
    metrics["one_round"] = True
    text = measurement_text(_decision(metrics))
    assert "noise unknown (one timing round)" in text
    assert "noise 0" not in text and "rounds give" not in text and "beyond" not in text


def test_a_single_round_recorded_without_its_flag_claims_no_noise_either():
    # decisions of histories from before gate 4 flagged every single round: one ratio,
    # "noise 0.0%", and every difference "beyond" it (run 1's feedback)
    decision = decide_category([0.2292], [0.2464], gamma=1.03, noise_limit=0.1)
    assert decision.speedup_low == decision.speedup_high
    metrics = {"decision": decision.as_dict()}
    text = measurement_text(_decision(metrics))
    assert "noise unknown (one timing round)" in text
    assert "0.0%" not in text and "rounds give" not in text and "beyond" not in text
    assert "within the measurement's noise" not in timing_feedback(_decision(metrics))


def test_a_dispatch_verdict_in_the_decision_serves_when_no_timing_was_carried():
    metrics = _metrics(SLOWER_ROUNDS)
    verdict = GateVerdict(
        gate=GateName.PERFORMANCE, status=GateStatus.FAIL, reason="slower", metrics=metrics
    )
    decision = _decision(None, verdicts=[verdict], accepted=False, deciding_gate="performance")
    assert "noise 0.7%" in measurement_text(decision)


def test_sibling_lines_carry_the_plan_and_the_labelled_numbers():
    lines = sibling_lines(
        [
            _decision(
                _metrics(SLOWER_ROUNDS),
                direction="persistent grid",
                description="One program per SM loops over rows with a prefetch of the next row.",
            ),
            _decision(
                None,
                direction="vectorize",
                accepted=False,
                deciding_gate="correctness",
                reason="fail: seed 0: max abs error 0.5",
            ),
            _decision(_metrics(NOISY_ROUNDS), direction="own"),
        ],
        exclude_plan="own",
    )
    assert len(lines) == 2
    assert lines[0].startswith("- persistent grid: correct, the whole forward with its kernel")
    assert "noise 0.7%" in lines[0] and "beyond this noise" in lines[0]
    assert "[plan: One program per SM loops over rows" in lines[0]
    assert lines[1].startswith("- vectorize: rejected at correctness: fail: seed 0")
    assert "per-kernel" not in "".join(lines)


def test_the_summarizer_reads_the_plan_the_numbers_and_the_noise_verdict():
    long_plan = "Use one warp per row and keep the row in registers. " * 20
    entry = render_summary_outcome(
        _decision(_metrics(NOISY_ROUNDS), description=long_plan, attempt=1)
    )
    first, second = entry.splitlines()
    assert first.startswith("- single-read rows (retry 1): correct, the whole forward")
    assert "the difference is within this noise" in first and "per-kernel" not in first
    label = "  plan it was asked to follow (the planner's assumptions, unverified): "
    assert second.startswith(label + "Use one warp per row")
    assert len(second) <= len(label) + 300 and second.endswith("...")
    assert render_outcome(_decision(None)).endswith("correct, untimed")
    # its instructions forbid facts it was not given and rules from noise
    assert "Use only facts stated in the outcomes" in prompts.SUMMARIZER_SYSTEM
    assert 'A difference "within this noise" is' in prompts.SUMMARIZER_SYSTEM
    assert "never turn it into a rule" in prompts.SUMMARIZER_SYSTEM


def test_a_candidate_built_on_a_faster_state_is_compared_with_that_state_too():
    # run 1: round-1 candidates at 1.030-1.096x over Inductor, built on a 1.146x state, were
    # told "faster than the baseline" and summarised as gains
    metrics = _metrics(SLOWER_ROUNDS)
    on_root = _decision(metrics)
    speed = on_root.speedup
    assert speed is not None and speed < 1.0
    parent = speed / 0.956  # the state it was built on measured this over Inductor
    candidate = on_root.candidate.model_copy(update={"parent_id": "s1", "parent_speedup": parent})
    on_state = on_root.model_copy(update={"candidate": candidate})
    text = timing_feedback(on_state)
    assert (
        f"Against the code you started from: 0.956x the state it was built on (which measured "
        f"{parent:.3f}x over Inductor in its own gate run): slower than the code your change "
        "started from." in text
    )
    line = render_outcome(on_state)
    assert "0.956x the state it was built on" in line
    assert line.endswith("slower than the code its change started from")
    faster = on_root.candidate.model_copy(update={"parent_speedup": speed / 1.02})
    assert "1.020x the state" in render_outcome(on_root.model_copy(update={"candidate": faster}))
    # a candidate on Inductor's own code: nothing to compare but the baseline
    assert "started from" not in timing_feedback(on_root) + render_outcome(on_root)
