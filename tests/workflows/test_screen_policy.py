"""The selection policy of the two-tier search: which screened candidates earn a cascade."""

from __future__ import annotations

from kernelopt.contracts.screening import ScreeningEstimate, ScreenParams
from workflows.screen_policy import bar_for, select_for_cascade

PARAMS = ScreenParams(enabled=True, margin=0.1, cap=3)


def est(cid: str, speedup: float | None, ok: bool = True, note: str = "") -> ScreeningEstimate:
    ms = 1.0 / speedup if speedup else None
    return ScreeningEstimate(
        candidate_id=cid,
        smoke_ok=ok,
        smoke_note=note,
        estimated_ms=ms,
        baseline_ms=1.0 if ms else None,
        estimated_speedup=speedup,
    )


def chosen(out: list[ScreeningEstimate]) -> list[str]:
    return [e.candidate_id for e in out if e.selected]


def test_the_bar_is_the_worst_of_a_full_beam_or_none_while_it_has_room() -> None:
    assert bar_for([1.0, 1.5, None, 1.2], width=3, last_round=False).speedup == 1.0
    assert bar_for([1.0, 1.5, 1.2, 2.0], width=3, last_round=False).speedup == 1.2
    assert bar_for([1.0, 1.5], width=3, last_round=False).speedup is None
    # the last round: nothing follows, only the outcome can change (the root counts as 1.0)
    assert bar_for([1.0, 1.5, 1.2], width=3, last_round=True).speedup == 1.5
    assert bar_for([0.7], width=3, last_round=True).speedup == 1.0


def test_only_candidates_that_could_enter_a_full_beam_are_gated() -> None:
    members = [0.9, 1.3, 1.6, 1.2]  # full at width 3: the bar is 1.2
    out = select_for_cascade(
        [est("slow", 0.8), est("near", 1.1), est("fast", 1.5), est("edge", 1.08)],
        members,
        width=3,
        params=PARAMS,
    )
    # 1.1 * 1.1 >= 1.2 (within the margin); 1.08 * 1.1 < 1.2; best estimate first
    assert chosen(out) == ["fast", "near"]
    assert [e.candidate_id for e in out] == ["fast", "near", "edge", "slow"]
    why = {e.candidate_id: e.why for e in out}
    assert "below the beam's worst member (1.200x)" in why["slow"]
    assert "could beat the beam's worst member" in why["near"]


def test_the_margin_is_what_lets_a_noisy_estimate_through() -> None:
    members = [1.2, 1.2, 1.2]
    strict = select_for_cascade(
        [est("a", 1.15), est("b", 1.5)], members, 3, ScreenParams(margin=0.0, cap=3)
    )
    loose = select_for_cascade(
        [est("a", 1.15), est("b", 1.5)], members, 3, ScreenParams(margin=0.05, cap=3)
    )
    assert chosen(strict) == ["b"] and chosen(loose) == ["b", "a"]


def test_the_cap_bounds_the_cascades_of_a_round_best_estimates_first() -> None:
    out = select_for_cascade([est(f"c{i}", 1.0 + i / 10) for i in range(6)], [1.0], 4, PARAMS)
    assert chosen(out) == ["c5", "c4", "c3"]
    assert all("over the round's cap of 3" in e.why for e in out if not e.selected)


def test_failed_smoke_checks_are_screened_out_with_their_reason() -> None:
    out = select_for_cascade(
        [est("bad", None, ok=False, note="output 0: max abs error 0.5 > 0.01"), est("ok", 1.4)],
        [1.0],
        4,
        PARAMS,
    )
    assert chosen(out) == ["ok"]
    assert out[1].why == "smoke check failed: output 0: max abs error 0.5 > 0.01"


def test_at_least_one_candidate_per_round_goes_to_the_cascade() -> None:
    members = [2.0, 2.5, 3.0]
    out = select_for_cascade([est("a", 1.1), est("b", 1.3)], members, 3, PARAMS)
    assert chosen(out) == ["b"] and out[0].why.startswith("the round's best estimate")
    # even when every smoke check failed: the cascade's verdict is what the proposer learns from
    broken = select_for_cascade(
        [est("x", None, ok=False, note="n"), est("w", None, ok=False, note="m")], members, 3, PARAMS
    )
    assert chosen(broken) == ["w"]
    assert select_for_cascade([], members, 3, PARAMS) == []


def test_the_last_round_gates_only_what_could_beat_the_best() -> None:
    members = [1.0, 1.8]
    ests = [est("a", 1.5), est("b", 1.7), est("c", 2.4)]
    mid = select_for_cascade(ests, members, 4, PARAMS)  # the beam has room
    last = select_for_cascade(ests, members, 4, PARAMS, last_round=True)
    assert chosen(mid) == ["c", "b", "a"]
    assert chosen(last) == ["c", "b"]  # 1.7 * 1.1 >= 1.8; 1.5 * 1.1 < 1.8
    assert "the best so far (1.800x)" in next(e.why for e in last if e.candidate_id == "a")


def test_the_estimates_keep_their_numbers_and_stay_untrusted() -> None:
    ests = [est("a", 1.5), est("b", 0.5)]
    out = select_for_cascade(ests, [1.0, 1.0, 1.0], 3, PARAMS)
    for e in out:
        original = next(x for x in ests if x.candidate_id == e.candidate_id)
        assert e.untrusted and e.estimated_speedup == original.estimated_speedup
        assert e.model_copy(update={"selected": False, "why": ""}) == original


# --- LLM rounds: the fix loop is never denied ---------------------------------------------


def test_an_llm_round_gates_smoke_failures_and_crashes_for_their_feedback() -> None:
    members = [1.2, 1.3, 1.4]  # full at width 3: the bar is 1.2
    out = select_for_cascade(
        [
            est("wrong", 3.0, ok=False, note="output 0: max abs error 0.5 > 0.01"),
            est("crashed", None, ok=False, note="screening child died on it: exited early"),
            est("slow", 0.7),
        ],
        members,
        width=3,
        params=PARAMS,
        llm_round=True,
    )
    assert sorted(chosen(out)) == ["crashed", "wrong"]
    why = {e.candidate_id: e.why for e in out}
    assert why["wrong"].startswith("smoke check failed (output 0: max abs error 0.5")
    assert why["wrong"].endswith("gated for its feedback")
    assert "screening child died" in why["crashed"]
    # the smoke input said it was right, and its estimate cannot reach the beam
    assert "below the beam's worst member (1.200x)" in why["slow"]


def test_an_llm_round_has_no_cap_only_the_bar() -> None:
    fast = [est(f"c{i}", 1.5 + i / 10) for i in range(PARAMS.cap + 2)]
    out = select_for_cascade([*fast, est("slow", 0.5)], [1.0, 1.1, 1.2], 3, PARAMS, llm_round=True)
    assert sorted(chosen(out)) == sorted(e.candidate_id for e in fast)
    # the same candidates as built-in variants: the cap holds
    capped = select_for_cascade([*fast, est("slow", 0.5)], [1.0, 1.1, 1.2], 3, PARAMS)
    assert len(chosen(capped)) == PARAMS.cap


def test_an_llm_round_of_slow_correct_candidates_still_gates_its_best() -> None:
    out = select_for_cascade(
        [est("a", 0.6), est("b", 0.8)],
        [2.0],
        width=1,
        params=PARAMS,
        last_round=True,
        llm_round=True,
    )
    assert chosen(out) == ["b"] and out[0].why.startswith("the round's best estimate")
    assert "below the best so far (2.000x)" in out[1].why and not out[1].selected
