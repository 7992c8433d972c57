"""The search policy: UCB, beam, meltdown, re-timing, budgets -- pure functions, exact numbers."""

from __future__ import annotations

import math

import pytest

from kernelopt.contracts.directions import is_banned, normalize_direction
from workflows.search_policy import (
    ROOT_ID,
    BeamUCB,
    SearchTree,
    Spend,
    budget_exhausted,
    meltdown_bans,
    remaining,
    reward,
    should_retry_fix,
)


def test_reward_is_bounded_monotonic_and_zero_for_failures():
    assert reward(None) == 0.0
    assert reward(0.0) == 0.0
    assert reward(1.0) == pytest.approx(0.5)
    assert reward(3.0) == pytest.approx(0.75)
    assert reward(1.1) < reward(1.2) < reward(100.0) < 1.0


def test_ucb_matches_the_formula_with_c_1_4():
    tree = SearchTree.with_root("r" * 64)
    a = tree.add_child(ROOT_ID, "a", "a" * 64, 0, kernel_ms=1.0, baseline_ms=2.0)  # 2x
    tree.record_rejection(ROOT_ID)
    # root: visits 1 (own) + 1 (a) + 1 (rejection) = 3
    assert tree.root.visits == 3
    assert a.visits == 1
    expected = reward(2.0) + 1.4 * math.sqrt(math.log(3) / 1)
    assert tree.ucb("a") == pytest.approx(expected)
    root_mean = (reward(1.0) + reward(2.0) + 0.0) / 3
    assert tree.ucb(ROOT_ID) == pytest.approx(root_mean + 1.4 * math.sqrt(math.log(3) / 3))


def test_rewards_back_up_to_every_ancestor():
    tree = SearchTree.with_root("r" * 64)
    tree.add_child(ROOT_ID, "a", "a" * 64, 0, 1.0, 1.5)
    tree.apply_retime("a", 1.0, 1.5, ok=True)
    tree.add_child("a", "b", "b" * 64, 1, 1.0, 3.0)
    assert tree.nodes["a"].visits == 2
    assert tree.nodes["a"].value_sum == pytest.approx(reward(1.5) + reward(3.0))
    assert tree.root.value_sum == pytest.approx(reward(1.0) + reward(1.5) + reward(3.0))
    assert tree.nodes["b"].depth == 2


def test_only_retimed_states_are_eligible_to_seed_the_beam():
    tree = SearchTree.with_root("r" * 64)
    tree.add_child(ROOT_ID, "fast", "f" * 64, 0, 1.0, 5.0)
    assert [n.id for n in tree.eligible()] == [ROOT_ID]
    assert [n.id for n in BeamUCB(width=4).select(tree)] == [ROOT_ID]
    tree.apply_retime("fast", 1.0, 4.0, ok=True)
    assert {n.id for n in BeamUCB(width=4).select(tree)} == {ROOT_ID, "fast"}


def test_beam_takes_the_top_ucb_states_and_skips_duplicate_sources():
    tree = SearchTree.with_root("r" * 64)
    for name, speed in (("a", 1.2), ("b", 2.0), ("c", 1.5)):
        tree.add_child(ROOT_ID, name, name * 64, 0, 1.0, speed)
        tree.apply_retime(name, 1.0, speed, ok=True)
    tree.add_child(ROOT_ID, "b2", "b" * 64, 0, 1.0, 2.0)  # same source as b
    tree.apply_retime("b2", 1.0, 2.0, ok=True)
    beam = BeamUCB(width=2).select(tree)
    # a, b, c, b2 have one visit each: UCB orders them by mean reward (speedup)
    assert tree.ucb("b") > tree.ucb("c") > tree.ucb("a")
    assert tree.ucb("b") == pytest.approx(tree.ucb("b2"))
    assert [n.id for n in beam] == ["b", "c"]  # b2 ties b but shares its source
    wide = BeamUCB(width=10).select(tree)
    assert len(wide) == 4  # root, a, b, c -- b2 shares b's source
    assert {"b", "b2"} & {n.id for n in wide} == {"b"}


def test_beam_prefers_rarely_expanded_states_when_means_tie():
    tree = SearchTree.with_root("r" * 64)
    for name in ("x", "y"):
        tree.add_child(ROOT_ID, name, name * 64, 0, 1.0, 1.5)
        tree.apply_retime(name, 1.0, 1.5, ok=True)
    for _ in range(3):
        tree.add_child("x", f"x{_}", f"{_}" * 64, 1, 1.0, 1.5)  # x expanded three times
    beam = BeamUCB(width=1).select(tree)
    assert beam[0].id == "y"  # same mean reward, fewer visits -> larger exploration bonus


def test_retime_keeps_the_conservative_speedup_and_drops_failures():
    tree = SearchTree.with_root("r" * 64)
    tree.add_child(ROOT_ID, "lucky", "l" * 64, 0, 1.0, 3.0)  # 3x first time
    tree.add_child(ROOT_ID, "flaky", "f" * 64, 0, 1.0, 2.0)
    tree.apply_retime("lucky", 1.0, 1.2, ok=True)  # 1.2x second time
    tree.apply_retime("flaky", None, None, ok=False)
    assert tree.nodes["lucky"].speedup == pytest.approx(1.2)
    assert tree.nodes["lucky"].first_speedup == pytest.approx(3.0)
    assert tree.nodes["flaky"].dropped
    assert tree.best().id == "lucky"
    # the ancestor's value follows the correction
    assert tree.root.value_sum == pytest.approx(reward(1.0) + reward(1.2) + 0.0)


def test_winners_to_retime_are_this_iterations_best_first_at_most_beam_width():
    tree = SearchTree.with_root("r" * 64)
    tree.add_child(ROOT_ID, "old", "o" * 64, 0, 1.0, 9.0)
    for name, speed in (("a", 1.1), ("b", 1.9), ("c", 1.4), ("d", 0.7)):
        tree.add_child(ROOT_ID, name, name * 64, 1, 1.0, speed)
    winners = tree.winners_to_retime(iteration=1, width=3)
    assert [n.id for n in winners] == ["b", "c", "a"]
    tree.apply_retime("b", 1.0, 1.9, ok=True)
    assert [n.id for n in tree.winners_to_retime(1, 3)] == ["c", "a", "d"]


def test_after_the_last_round_only_possible_winners_are_retimed():
    tree = SearchTree.with_root("r" * 64)
    for name, speed in (("a", 1.1), ("b", 0.8), ("c", 1.0), ("d", 1.4)):
        tree.add_child(ROOT_ID, name, name * 64, 0, 1.0, speed)
    assert [n.id for n in tree.winners_to_retime(0, 4)] == ["d", "a", "c", "b"]
    assert [n.id for n in tree.winners_to_retime(0, 4, last=True)] == ["d", "a"]
    # what is skipped could not have won: the kept speedup is the minimum of both timings
    tree.apply_retime("c", 1.0, 0.5, ok=True)  # a lucky second run (2x) still keeps 1.0x
    assert tree.best() is None


def test_best_needs_a_retimed_state_faster_than_the_root():
    tree = SearchTree.with_root("r" * 64)
    assert tree.best() is None
    tree.add_child(ROOT_ID, "slow", "s" * 64, 0, 2.0, 1.0)
    tree.apply_retime("slow", 2.0, 1.0, ok=True)
    tree.add_child(ROOT_ID, "unretimed", "u" * 64, 0, 1.0, 4.0)
    assert tree.best() is None
    tree.apply_retime("unretimed", 1.0, 1.5, ok=True)
    assert tree.best().id == "unretimed"
    assert tree.best().speedup == pytest.approx(1.5)


def test_tree_round_trips_through_plain_dicts():
    tree = SearchTree.with_root("r" * 64)
    tree.add_child(ROOT_ID, "a", "a" * 64, 0, 1.0, 1.5, direction="vectorize", label="")
    tree.apply_retime("a", 1.0, 1.4, ok=True)
    tree.record_rejection("a")
    again = SearchTree.from_dict(tree.to_dict())
    assert again.to_dict() == tree.to_dict()
    assert again.ucb("a") == pytest.approx(tree.ucb("a"))


def test_duplicate_node_ids_are_refused():
    tree = SearchTree.with_root("r" * 64)
    tree.add_child(ROOT_ID, "a", "a" * 64, 0, 1.0, 1.5)
    with pytest.raises(ValueError):
        tree.add_child(ROOT_ID, "a", "b" * 64, 0, 1.0, 1.5)


def test_meltdown_needs_six_plans_on_two_or_fewer_approaches():
    history = ["Vectorize loads", "vectorize-loads", "Tune BLOCK", "tune block", "vectorize loads"]
    assert meltdown_bans(history) == []  # only five so far
    history.append("TUNE  block!")
    assert meltdown_bans(history) == ["tune-block", "vectorize-loads"]
    # one different idea among the last six breaks the collapse
    assert meltdown_bans([*history, "split reduction"]) == []
    diverse = ["a", "b", "c", "a", "b", "c"]
    assert meltdown_bans(diverse) == []
    assert meltdown_bans(["same"] * 6) == ["same"]


def test_banned_directions_match_after_normalisation():
    assert normalize_direction("  Vectorize LOADS (128-bit) ") == "vectorize-loads-128-bit"
    assert is_banned("vectorize loads", ["Vectorize-Loads"])
    assert not is_banned("vectorize stores", ["vectorize loads"])
    assert not is_banned("!!!", ["!!!"])


def test_budget_checks_every_allowance_and_none_means_unlimited():
    spend = Spend(tokens=1000, usd=0.5, gpu_seconds=30.0, wall_seconds=10.0)
    assert budget_exhausted(spend, {}) is None
    assert budget_exhausted(spend, {"tokens": None, "usd": None}) is None
    assert budget_exhausted(spend, {"tokens": 1001}) is None
    assert budget_exhausted(spend, {"tokens": 1000}) == "tokens"
    assert budget_exhausted(spend, {"usd": 1.0, "gpu_seconds": 29.0}) == "gpu_seconds"
    left = remaining(spend, {"tokens": 1500, "usd": None, "wall_seconds": 5.0})
    assert left == {"tokens": 500.0, "usd": None, "gpu_seconds": None, "wall_seconds": 0.0}


def test_retry_fix_only_for_fixable_gates_and_up_to_k():
    assert should_retry_fix("static", 0, 4)
    assert should_retry_fix("correctness", 3, 4)
    assert should_retry_fix("parse", 0, 1)
    assert not should_retry_fix("correctness", 4, 4)
    assert not should_retry_fix("performance", 0, 4)
    assert not should_retry_fix("infrastructure", 0, 4)
    assert not should_retry_fix("static", 0, 0)


def _grown_tree(states: int) -> SearchTree:
    """A chain-and-fan tree: each re-timed state i has speedup 1 + i/100 and a losing sibling."""
    tree = SearchTree.with_root("r" * 64)
    parent = ROOT_ID
    for i in range(states):
        node_id, loser = f"s{i}", f"l{i}"
        tree.add_child(parent, node_id, f"{i:016x}" + "a" * 48, i, 1.0, 1.0 + i / 100)
        tree.apply_retime(node_id, 1.0, 1.0 + i / 100, ok=True)
        tree.add_child(parent, loser, f"{i:016x}" + "b" * 48, i, 2.0, 1.0)  # never re-timed
        if i % 3 == 0:
            parent = node_id  # deepen every third state: ancestors must survive
    return tree


def test_prune_keeps_the_best_and_most_promising_states_with_their_ancestors():
    tree = _grown_tree(60)
    beam_before = [n.id for n in BeamUCB(width=4).select(tree)]
    ucb_before = {n.id: tree.ucb(n.id) for n in tree.eligible()}
    best_before = tree.best().id
    removed = tree.prune(keep=8)
    assert removed and ROOT_ID not in removed
    assert set(removed).isdisjoint(tree.nodes)
    assert tree.order == [i for i in tree.order if i in tree.nodes]
    # every kept state's chain to the root is intact
    for node in tree.nodes.values():
        assert tree.ancestors(node.id)[-1].id == ROOT_ID
    # the next beam and the winner are unchanged; kept states' UCB scores are unchanged
    assert [n.id for n in BeamUCB(width=4).select(tree)] == beam_before
    assert tree.best().id == best_before
    for node_id in tree.nodes:
        if node_id in ucb_before:
            assert tree.ucb(node_id) == pytest.approx(ucb_before[node_id])
    # the losers (never re-timed) are gone, but their kernels still count as seen
    assert not any(i.startswith("l") for i in tree.nodes)
    assert tree.has_source(f"{5:016x}" + "b" * 48)
    assert not tree.has_source(f"{999:016x}" + "b" * 48)
    # bounded: at most 2 x keep chosen states plus their ancestors, far below the 121 grown
    assert len(tree.nodes) < 121 // 2


def test_prune_is_a_no_op_for_small_trees_and_survives_a_round_trip():
    tree = _grown_tree(3)
    assert tree.prune(keep=8) == []
    big = _grown_tree(40)
    big.prune(keep=4)
    again = SearchTree.from_dict(big.to_dict())
    assert again.to_dict() == big.to_dict()
    assert again.pruned_sources == big.pruned_sources and again.pruned_sources
    assert "pruned_sources" not in tree.to_dict()  # unpruned trees serialise as before


def test_prune_forgets_dropped_states_without_marking_their_source_seen():
    tree = SearchTree.with_root("r" * 64)
    for i in range(10):
        tree.add_child(ROOT_ID, f"s{i}", f"{i:016x}" + "a" * 48, 0, 1.0, 1.5)
        tree.apply_retime(f"s{i}", 1.0, 1.5, ok=i != 7)  # s7 fails its re-timing
    tree.prune(keep=2)
    assert "s7" not in tree.nodes
    assert not tree.has_source(f"{7:016x}" + "a" * 48)  # may be proposed and tried again
