"""A ``Linear`` then GELU problem and its Inductor kernel made wrong, for the GPU gate tests.

The campaign test and the screening test compile the same small model and bias its
kernel's stores; one definition keeps the two about the same kernel.
"""

from __future__ import annotations

import re

_PROBLEM = """
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.lin = nn.Linear(d, d)

    def forward(self, x):
        return F.gelu(self.lin(x)){tail}


def get_init_inputs():
    return [1024]


def get_inputs():
    return [torch.randn({rows}, 1024)]
"""


def linear_gelu_problem(rows: int, tail: str = "") -> str:
    """The problem file's text: ``rows`` rows of 1024 through ``Linear`` and GELU, then
    ``tail`` (e.g. ``" * 1.5"``) applied to the result."""
    return _PROBLEM.format(rows=rows, tail=tail)


def add_to_stores(source: str, amount: str) -> str:
    """``source`` with ``amount`` added to the value every ``tl.store`` writes (Inductor's store
    form): a kernel that is wrong by that much."""
    text, n = re.subn(r"tl\.store\(([^,]+), (tmp\d+),", rf"tl.store(\1, \2 + {amount},", source)
    assert n >= 1, "no store found to change"
    return text
