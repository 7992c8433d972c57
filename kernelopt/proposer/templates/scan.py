"""Inclusive cumulative sum / product over one axis (``tl.associative_scan``, single pass)."""

from __future__ import annotations

import math

from kernelopt.proposer.templates.base import (
    FLOAT_DTYPES,
    KernelView,
    Template,
    TemplateMatch,
    contiguous,
    dtype_name,
    rank_by_prior,
    reduced_axis,
    row_tiles,
    strided_tiles,
)

_OPS = {"cumsum": "sum", "cumprod": "prod"}
SCAN_TILE = 4096  # a scan keeps its operand and its partial results live: half a reduce's tile


class ScanTemplate(Template):
    """A kernel whose only op is one ``cumsum`` / ``cumprod`` over one axis of a dense float input."""

    name = "scan"
    kernel_file = "k_scan.py"

    def match(self, view: KernelView) -> TemplateMatch | None:
        ops = view.fragment.op_counts()
        if len(ops) != 1 or next(iter(ops)) not in _OPS or sum(ops.values()) != 1:
            return None
        node = view.fragment.calls()[0]
        if "dtype" in node.kwargs or len(node.args) != 2 or len(view.tensor_args("in")) != 1:
            return None  # an accumulation dtype we do not model
        x = view.arg_for(node.args[0])
        x_node = view.node(node.args[0])
        out = view.only_output()
        if x is None or x_node is None or x_node.shape is None or out is None:
            return None
        axis = reduced_axis(node.args[1], len(x_node.shape))
        y_spec = view.args[out].tensor
        if (
            axis is None
            or y_spec is None
            or view.stored_node(out) is not node
            or list(y_spec.shape) != list(x_node.shape)
            or not contiguous(x_node.shape, x_node.stride)
            or not contiguous(y_spec.shape, y_spec.stride)
            or dtype_name(x_node.dtype) not in FLOAT_DTYPES
            or y_spec.dtype not in FLOAT_DTYPES
        ):
            return None
        outer = math.prod(x_node.shape[:axis])
        inner = math.prod(x_node.shape[axis + 1 :])
        n_scan = x_node.shape[axis]
        return TemplateMatch(
            template=self.name,
            args={"x": x, "y": out},
            consts={"outer": outer, "n_scan": n_scan, "inner": inner, "op": _OPS[node.short]},
            what=f"{node.short} along an axis of {n_scan} (outer {outer}, inner {inner})",
        )

    def grid(self, match: TemplateMatch, sm_count: int) -> list[dict[str, int]]:
        c = match.consts
        outer, n_scan, inner = c["outer"], c["n_scan"], c["inner"]
        if inner > 1:  # strided axis: tiles of [BLOCK (scanned), BLOCK_K (contiguous)]
            return strided_tiles(outer, n_scan, inner, sm_count, per_thread=32, cap_block=True)
        points = row_tiles(
            outer, n_scan, (128, 256, 512, 1024, 2048, 4096), max_tile=SCAN_TILE, per_thread=32
        )
        # a looped row costs a serial carry per chunk: fewer, wider chunks first among equals
        return rank_by_prior(
            points,
            tile=lambda p: p["ROWS"] * p["BLOCK"],
            programs=lambda p: -(-outer // p["ROWS"]),
            sm_count=sm_count,
            extra=lambda p: 0.25 * max(0.0, (n_scan / p["BLOCK"]) ** 0.5 - 1.0),
        )

    def call(self, match: TemplateMatch, params: dict[str, int]) -> str:
        a, c = match.args, match.consts
        knobs = ", ".join(f"{k}={params[k]}" for k in sorted(params))
        return (
            f"ko_scan(args[{a['x']}], args[{a['y']}], {c['outer']}, {c['n_scan']}, "
            f"{c['inner']}, {c['op']!r}, {knobs})"
        )
