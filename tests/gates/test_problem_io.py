"""The data path's helpers: equality, mapped loads and digests give what the slow forms gave."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from gates.problem_io import digest_dir, digest_files, load_values, same_values, save_values
from kernelopt.store import file_digest


@pytest.mark.parametrize(
    ("a", "b", "same"),
    [
        (torch.tensor([1.0, float("nan")]), torch.tensor([1.0, float("nan")]), True),
        (torch.tensor([0.0, 2.0]), torch.tensor([-0.0, 2.0]), True),  # == says equal
        (torch.tensor([1.0, float("nan")]), torch.tensor([1.0, 2.0]), False),
        (torch.tensor([1.0, 2.0]), torch.tensor([1.0, 2.5]), False),
        (torch.tensor([float("inf")]), torch.tensor([float("inf")]), True),
        (torch.tensor([1, 2]), torch.tensor([1, 2]), True),
        (torch.tensor([1, 2]), torch.tensor([1, 3]), False),
        (torch.tensor([1.0, 2.0]), torch.tensor([1.0, 2.0], dtype=torch.float64), False),
        (torch.tensor([1.0, 2.0]), torch.tensor([[1.0, 2.0]]), False),
        (torch.tensor([True, False]), torch.tensor([True, False]), True),
        (3, 3, True),
    ],
)
def test_same_values_is_bitwise_equality_with_nan_equal_to_nan(a: object, b: object, same: bool):
    assert same_values(a, b) is same
    tensors = isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)
    if tensors and a.shape == b.shape and a.dtype == b.dtype and a.is_floating_point():
        rule = bool(((a == b) | (torch.isnan(a) & torch.isnan(b))).all())  # spelled out
        assert same_values(a, b) is rule


def test_a_mapped_load_holds_the_saved_values_after_the_file_is_gone(tmp_path: Path) -> None:
    values = [torch.randn(64, 33), torch.arange(5), 2.5]
    path = tmp_path / "set.pt"
    save_values(path, values)
    mapped = load_values(path, mmap=True)
    path.unlink()
    assert torch.equal(mapped[0], values[0]) and torch.equal(mapped[1], values[1])
    assert mapped[2] == 2.5


def test_files_are_hashed_side_by_side_to_the_digests_one_by_one(tmp_path: Path) -> None:
    paths = []
    for i in range(11):  # more files than hashing threads
        path = tmp_path / f"f{i:02d}.pt"
        path.write_bytes(bytes([i]) * (1000 + 37 * i))
        paths.append(path)
    assert digest_files(paths) == [file_digest(p) for p in paths]
    assert digest_files([]) == []
    (tmp_path / "ignored.txt").write_text("not a set")
    assert digest_dir(tmp_path) == {p.name: file_digest(p) for p in paths}
