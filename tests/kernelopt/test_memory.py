"""Experience memory: dedup, tag + keyword retrieval, token bound, persistence, cross-campaign opt-in."""

from __future__ import annotations

import pytest

from kernelopt.contracts.search import Experience
from kernelopt.memory import (
    CHARS_PER_TOKEN,
    ExperienceMemory,
    load_shared,
    shared_path,
    tag_score,
    update_shared,
)
from kernelopt.store import open_store


def exp(situation: str, action: str, tags: list[str], effect: str = "") -> Experience:
    return Experience(situation=situation, action=action, effect=effect, tags=tags)


POINTWISE = exp(
    "pointwise kernel, memory bound",
    "XBLOCK=2048, 8 warps",
    ["kind/pointwise", "bottleneck/memory_bound"],
    "1.10x",
)
REDUCTION = exp(
    "long row reduction, underutilized",
    "split the reduction in two stages",
    ["kind/reduction", "bottleneck/underutilized"],
    "1.30x",
)
PERSISTENT = exp(
    "persistent reduction with spills",
    "lower XBLOCK to cut registers",
    ["kind/reduction/persistent", "bottleneck/underutilized"],
)


def test_repeats_raise_support_instead_of_adding_entries():
    memory = ExperienceMemory()
    assert memory.add([POINTWISE, REDUCTION], "c1") == 2
    same = exp(
        "Pointwise  kernel, memory bound",
        "xblock=2048, 8 warps",
        ["direction/launch-config"],
        "1.12x",
    )
    assert memory.add([same], "c2") == 0
    assert len(memory) == 2
    entry = next(e for e in memory.entries.values() if e.support == 2)
    assert entry.campaigns == ["c1", "c2"]
    assert entry.effect == "1.12x"
    assert "direction/launch-config" in entry.tags and "kind/pointwise" in entry.tags


def test_hierarchical_tags_match_by_shared_path():
    assert tag_score(["kind/reduction"], ["kind/reduction/persistent"]) == pytest.approx(1.0)
    assert tag_score(["kind/reduction/persistent"], ["kind/reduction"]) == pytest.approx(2 / 3)
    assert (
        tag_score(["kind/reduction"], ["kind/pointwise"]) == 0.0
    )  # shared "kind/" alone is no match
    assert tag_score(["bottleneck/memory_bound", "kind/pointwise"], ["kind/pointwise"]) == 1.0


def test_retrieval_ranks_by_tags_then_keywords():
    memory = ExperienceMemory()
    memory.add([POINTWISE, REDUCTION, PERSISTENT])
    hits = memory.retrieve(["kind/reduction", "bottleneck/underutilized"], "registers spills")
    assert [h.action for h in hits] == [
        "lower XBLOCK to cut registers",
        "split the reduction in two stages",
    ]
    assert memory.retrieve(["kind/pointwise"], "")[0].action == "XBLOCK=2048, 8 warps"
    assert memory.retrieve(["kind/nothing"], "zzz") == []


def test_retrieval_stays_within_the_token_budget():
    memory = ExperienceMemory()
    memory.add(
        exp(f"pointwise situation number {i} " + "x" * 80, f"action {i}", ["kind/pointwise"])
        for i in range(30)
    )
    hits = memory.retrieve(["kind/pointwise"], "", max_tokens=100, limit=50)
    used = sum(len(h.render()) // CHARS_PER_TOKEN + 1 for h in hits)
    assert 0 < used <= 100
    assert len(hits) < 30
    assert len(memory.render(hits)) // CHARS_PER_TOKEN <= 100


def test_memory_is_bounded_keeping_the_best_supported():
    memory = ExperienceMemory(max_entries=3)
    memory.add([POINTWISE, POINTWISE])  # support 2
    memory.add(exp(f"s{i}", f"a{i}", ["kind/x"]) for i in range(5))
    assert len(memory) == 3
    assert any(e.action == POINTWISE.action for e in memory.entries.values())


def test_round_trip_through_the_artifact_store(tmp_path):
    store = open_store(tmp_path / "a")
    memory = ExperienceMemory()
    memory.add([POINTWISE, REDUCTION], "c1")
    ref = memory.save(store)
    again = ExperienceMemory.load(store, ref)
    assert again.to_json() == memory.to_json()
    assert len(ExperienceMemory.load(store, None)) == 0


def test_cross_campaign_store_merges_under_home(tmp_path):
    assert len(load_shared(tmp_path)) == 0
    one = ExperienceMemory()
    one.add([POINTWISE], "c1")
    update_shared(tmp_path, one)
    two = ExperienceMemory()
    two.add([POINTWISE, REDUCTION], "c2")
    update_shared(tmp_path, two)
    shared = load_shared(tmp_path)
    assert shared_path(tmp_path).is_file()
    assert len(shared) == 2
    pw = next(e for e in shared.entries.values() if e.action == POINTWISE.action)
    assert pw.campaigns == ["c1", "c2"]
