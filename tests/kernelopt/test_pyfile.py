"""Importing user files: a file's own dataclasses become pytree nodes, so an output of
one is compared field by field (tests/problems/identity/dataclass_output.py runs the gates)."""

from __future__ import annotations

from pathlib import Path

import torch
from torch.utils._pytree import tree_flatten

from gates.problem_io import flatten_output
from kernelopt.pyfile import exec_file

SOURCE = """
from dataclasses import dataclass, field
import torch

@dataclass
class Pair:
    first: torch.Tensor
    second: torch.Tensor

@dataclass
class Counted:
    value: torch.Tensor
    calls: int = field(default=0, init=False)
"""


def test_a_files_dataclasses_flatten_to_their_fields(tmp_path: Path) -> None:
    path = tmp_path / "outputs.py"
    path.write_text(SOURCE)
    module = exec_file(path, "kernelopt_test_pyfile_outputs")
    a, b = torch.zeros(2), torch.ones(3)
    leaves = flatten_output(module.Pair(a, b))
    assert len(leaves) == 2 and leaves[0] is a and leaves[1] is b
    # a field __init__ does not take: pytree could not rebuild it, so it stays one leaf
    counted = module.Counted(a)
    assert tree_flatten(counted)[0] == [counted]
