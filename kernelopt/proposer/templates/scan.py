"""Inclusive cumulative sum / product over one axis (``tl.associative_scan``, single pass)."""

from __future__ import annotations

from kernelopt.proposer.templates.axis import AxisTemplate, row_tiles
from kernelopt.proposer.templates.base import (
    KernelView,
    TemplateMatch,
    match_axis_op,
    rank_by_prior,
)

_OPS = {"cumsum": "sum", "cumprod": "prod"}
SCAN_TILE = 4096  # a scan keeps its operand and its partial results live: half a reduce's tile


class ScanTemplate(AxisTemplate):
    """A kernel whose only op is one ``cumsum`` / ``cumprod`` over one axis of a dense float input."""

    name = "scan"
    kernel_file = "k_scan.py"
    host = "ko_scan"
    length = "n_scan"
    op_consts = ("op",)
    per_thread = 32
    cap_block = True

    def match(self, view: KernelView) -> TemplateMatch | None:
        found = match_axis_op(view, _OPS)
        if found is None or len(found.node.args) != 2 or found.out_shape != found.shape:
            return None  # a scan names its axis and keeps the input's shape
        outer, inner, n_scan = found.outer, found.inner, found.shape[found.axis]
        return TemplateMatch(
            template=self.name,
            args={"x": found.x, "y": found.out},
            consts={
                "outer": outer,
                "n_scan": n_scan,
                "inner": inner,
                "op": _OPS[found.node.short],
            },
            what=f"{found.node.short} along an axis of {n_scan} (outer {outer}, inner {inner})",
        )

    def contiguous_grid(self, outer: int, n_scan: int, sm_count: int) -> list[dict[str, int]]:
        blocks = (128, 256, 512, 1024, 2048, 4096)
        points = row_tiles(outer, n_scan, blocks, max_tile=SCAN_TILE, per_thread=self.per_thread)
        # a looped row costs a serial carry per chunk: fewer, wider chunks first among equals
        return rank_by_prior(
            points,
            tile=lambda p: p["ROWS"] * p["BLOCK"],
            programs=lambda p: -(-outer // p["ROWS"]),
            sm_count=sm_count,
            extra=lambda p: 0.25 * max(0.0, (n_scan / p["BLOCK"]) ** 0.5 - 1.0),
        )
