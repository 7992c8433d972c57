"""Suite discovery: level folders, flat folders, ordering, invalid files."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelopt.bench.suite import discover_suite
from kernelopt.errors import ProblemError
from tests.support.bench_outcomes import write_suite

REPO_PROBLEMS = Path(__file__).resolve().parents[3] / "problems"


def test_level_layout_numeric_order(tmp_path: Path) -> None:
    write_suite(tmp_path, {"level1": ["10_b", "2_a", "1_c"], "level2": ["1_x"], "other": ["1_y"]})
    (tmp_path / "level1" / "_helper.py").write_text("x = 1\n")
    (tmp_path / "level1" / "notes.txt").write_text("not a problem")
    entries = discover_suite(tmp_path)
    assert [e.key for e in entries] == ["level1/1_c", "level1/2_a", "level1/10_b", "level2/1_x"]
    assert entries[0].level == 1 and entries[0].name == "1_c"
    assert entries[0].path == (tmp_path / "level1" / "1_c.py").resolve()
    assert [e.key for e in discover_suite(tmp_path, levels={2})] == ["level2/1_x"]


def test_flat_layout(tmp_path: Path) -> None:
    write_suite(tmp_path, {"": ["b", "a"]})
    entries = discover_suite(tmp_path)
    assert [(e.level, e.key) for e in entries] == [(None, "a"), (None, "b")]


def test_invalid_problem_strict_and_lenient(tmp_path: Path) -> None:
    write_suite(tmp_path, {"level1": ["1_ok"]})
    (tmp_path / "level1" / "2_broken.py").write_text(
        "import torch\n\ndef get_inputs():\n    return []\n"
    )
    with pytest.raises(ProblemError, match="Model"):
        discover_suite(tmp_path)
    assert [e.name for e in discover_suite(tmp_path, strict=False)] == ["1_ok"]


def test_a_model_named_by_assignment_is_a_problem(tmp_path: Path) -> None:
    """``Model = TinyNet`` names the module, as ``kernelopt optimize`` accepts it."""
    (tmp_path / "1_alias.py").write_text(
        "import torch\n\nclass TinyNet(torch.nn.Module):\n    def forward(self, x):\n"
        "        return x\n\nModel = TinyNet\n\ndef get_inputs():\n    return []\n\n"
        "def get_init_inputs():\n    return []\n"
    )
    assert [e.name for e in discover_suite(tmp_path)] == ["1_alias"]


def test_missing_or_empty_suite(tmp_path: Path) -> None:
    with pytest.raises(ProblemError):
        discover_suite(tmp_path / "nope")
    with pytest.raises(ProblemError, match="no problem files"):
        discover_suite(tmp_path)


def test_discovers_our_own_suite() -> None:
    entries = discover_suite(REPO_PROBLEMS)
    per_level = {lvl: sum(e.level == lvl for e in entries) for lvl in (1, 2, 3)}
    assert per_level[1] >= 30 and per_level[2] >= 15 and per_level[3] >= 6
    assert len({e.key for e in entries}) == len(entries)


def test_unseen_set_is_a_suite_of_its_own() -> None:
    """``problems/unseen`` runs as a flat suite; the level suite never picks it up."""
    unseen = discover_suite(REPO_PROBLEMS / "unseen")
    assert len(unseen) == 10 and all(e.level is None for e in unseen)
    assert [e.key for e in unseen] == sorted(e.key for e in unseen)
    levels = discover_suite(REPO_PROBLEMS)
    assert not [e for e in levels if e.path.parent.name == "unseen"]
    assert {e.key for e in levels}.isdisjoint(e.key for e in unseen)


def test_syntax_error_is_a_problem_error(tmp_path: Path) -> None:
    write_suite(tmp_path, {"level1": ["1_ok"]})
    (tmp_path / "level1" / "2_bad.py").write_text("class Model(:\n")
    with pytest.raises(ProblemError, match="syntax error"):
        discover_suite(tmp_path)
