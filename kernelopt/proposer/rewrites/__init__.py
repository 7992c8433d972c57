"""Algebraic rewrites of the traced model, proposed as whole-forward (ModelNew) candidates."""

from __future__ import annotations

from collections.abc import Callable

import torch.fx

from kernelopt.proposer.rewrites.rules import (
    dead_code,
    diag_to_broadcast,
    reassociate_products,
    reduce_before_linear,
    slice_before_linear,
    triangular_products,
)

Rule = Callable[[torch.fx.GraphModule], list[str]]

RULES: dict[str, Rule] = {
    "diag-broadcast": diag_to_broadcast,
    "slice-before-linear": slice_before_linear,
    "triangular-product": triangular_products,
    "reduce-before-linear": reduce_before_linear,
    "reassociate-products": reassociate_products,
    "dead-code": dead_code,
}
