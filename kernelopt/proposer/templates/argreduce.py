"""Argmax / argmin template (last axis), with an optional cast of the index."""

from __future__ import annotations

import math
from collections import Counter

from kernelopt.proposer.templates.base import (
    KernelView,
    Template,
    TemplateMatch,
    dense_io,
    next_pow2,
    rank_by_prior,
    reduced_axis,
)

_FORMS = {
    "argmax": (Counter(argmax=1), Counter(argmax=1, convert_element_type=1)),
    "argmin": (Counter(argmin=1), Counter(argmin=1, convert_element_type=1)),
}


class ArgReduceTemplate(Template):
    """``argmax(x, dim=-1)`` or ``argmin``, the index stored as int64 or cast once."""

    name = "argreduce"
    kernel_file = "k_argreduce.py"

    def match(self, view: KernelView) -> TemplateMatch | None:
        ops = view.fragment.op_counts()
        kind = next((k for k, forms in _FORMS.items() if ops in forms), None)
        if kind is None:
            return None
        node = view.fragment.first(kind)
        out = view.only_output()
        if node is None or out is None or len(node.args) < 2 or node.args[1] is None:
            return None  # no dim: the index into the flattened tensor
        x = view.arg_for(node.args[0])
        x_node = view.node(node.args[0])
        stored = view.stored_node(out)
        if x is None or x_node is None or x_node.shape is None or stored is None:
            return None
        if stored is not node and not (
            stored.short == "convert_element_type" and view.node(stored.args[0]) is not None
        ):
            return None
        if node.kwargs.get("keepdim", "False") not in ("False", "True"):
            return None
        axis = reduced_axis(node.args[1], len(x_node.shape))
        y_spec = view.args[out].tensor
        if axis != len(x_node.shape) - 1 or not dense_io(x_node, y_spec, float_out=False):
            return None  # the index is an integer: only the input must hold floats
        n_cols = x_node.shape[-1]
        n_rows = math.prod(x_node.shape[:-1])
        return TemplateMatch(
            template=self.name,
            args={"x": x, "y": out},
            consts={"n_cols": n_cols, "n_rows": n_rows, "is_min": kind == "argmin"},
            what=f"{kind} over rows of {n_cols}",
        )

    def grid(self, match: TemplateMatch, sm_count: int) -> list[dict[str, int]]:
        n_rows, n_cols = match.consts["n_rows"], match.consts["n_cols"]
        points = []
        for block in sorted({min(b, next_pow2(n_cols)) for b in (128, 256, 512, 1024, 2048)}):
            for rows in (1, 2, 4, 8):
                for warps in (1, 2, 4, 8):
                    if 1 <= rows * block / (32 * warps) <= 32:
                        points.append({"ROWS": rows, "BLOCK": block, "num_warps": warps})
        return rank_by_prior(
            points,
            tile=lambda p: p["ROWS"] * p["BLOCK"],
            programs=lambda p: -(-n_rows // p["ROWS"]),
            sm_count=sm_count,
        )

    def call(self, match: TemplateMatch, params: dict[str, int]) -> str:
        a, c = match.args, match.consts
        return (
            f"ko_argreduce(args[{a['x']}], args[{a['y']}], {c['n_cols']}, {c['is_min']}, "
            f"ROWS={params['ROWS']}, BLOCK={params['BLOCK']}, num_warps={params['num_warps']})"
        )
