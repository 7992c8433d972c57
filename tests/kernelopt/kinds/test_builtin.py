"""The built-in proposer's launch space for kernel problems (text work, plus one compile)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelopt.campaigns import prepare_problem
from kernelopt.contracts import BuiltinProposeInput, CompileInput, SegmentInput
from kernelopt.kinds.baseline import read_config
from kernelopt.kinds.builtin import (
    helion_label,
    helion_moves,
    label_of,
    propose,
    triton_moves,
    triton_space,
)
from kernelopt.store import open_store
from tests.kernelopt.kinds.conftest import PROBLEMS


def test_triton_space_and_moves() -> None:
    space = triton_space({"BLOCK": 128, "num_warps": 4, "GROUP": 3}, {})
    assert space["BLOCK"] == [8, 16, 32, 64, 128, 256, 512, 1024, 2048]
    assert space["num_warps"] == [1, 2, 4, 8, 16, 32] and space["GROUP"] == [1, 2, 3, 4, 5]
    assert triton_space({"BLOCK": 64}, {"BLOCK": [256, 512]})["BLOCK"] == [64, 256, 512]
    moves = triton_moves({"BLOCK": 64, "num_warps": 4}, {"BLOCK": [32, 64], "num_warps": [4, 8]})
    assert [label_of(m) for m in moves] == [
        "BLOCK=32,num_warps=4",
        "BLOCK=64,num_warps=8",
        "BLOCK=32,num_warps=8",
    ]


def test_helion_moves_walk_one_coordinate() -> None:
    current = {"k": {"block_sizes": [16, 4096], "num_warps": 32, "num_stages": 1, "x": [1]}}
    labels = [helion_label(m) for m in helion_moves(current)]
    assert labels == [
        "k:block_sizes=[32, 4096],num_warps=32,num_stages=1",
        "k:block_sizes=[8, 4096],num_warps=32,num_stages=1",
        "k:block_sizes=[16, 2048],num_warps=32,num_stages=1",
        "k:block_sizes=[16, 4096],num_warps=16,num_stages=1",
        "k:block_sizes=[16, 4096],num_warps=32,num_stages=2",
    ]
    assert all(m["k"]["x"] == [1] for m in helion_moves(current))  # other keys kept


@pytest.fixture(scope="module")
def compiled(kinds_env: Path):
    from kernelopt.compile.segment import segment
    from kernelopt.kinds.registry import compile_on

    store = open_store(kinds_env / "artifacts")
    spec = prepare_problem(PROBLEMS / "scale_add.py", store)
    result = compile_on(CompileInput(problem=spec), store, "cpu", lambda fn: 1.0)
    return result, segment(SegmentInput(compiled=result), store), store


def test_variants_walk_from_the_state_and_never_repeat_the_root(compiled) -> None:
    result, seg, store = compiled
    target = seg.targets[0]

    def ask(state, exclude=(), count=3):
        return propose(
            BuiltinProposeInput(
                compiled=result,
                segment=seg,
                target=target,
                state_source=state,
                count=count,
                exclude=list(exclude),
            ),
            store,
        )

    first = ask(target.source)
    assert [v.label for v in first.variants] == [
        "BLOCK=128,num_warps=4",
        "BLOCK=32,num_warps=4",
        "BLOCK=64,num_warps=2",
    ]
    text = store.get_text(first.variants[0].source)
    assert text.startswith(store.get_text(result.problem.source).rstrip("\n"))
    assert read_config(text) == {"BLOCK": 128, "num_warps": 4}
    assert "class ModelNew" in text
    tried = [v.label for v in first.variants]
    second = ask(first.variants[0].source, tried, count=10)
    labels = [v.label for v in second.variants]
    assert "BLOCK=64,num_warps=4" not in labels and not set(labels) & set(tried)
    assert labels[0] == "BLOCK=128,num_warps=2" and second.note.endswith(
        "exhausted after exclusions"
    )
