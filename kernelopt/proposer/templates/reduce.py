"""Single-axis sum / mean / amax / amin template (multi-row, split-row or strided-axis)."""

from __future__ import annotations

from kernelopt.proposer.templates.axis import AxisTemplate, row_tiles
from kernelopt.proposer.templates.base import (
    MAX_TILE,
    KernelView,
    TemplateMatch,
    match_axis_op,
    rank_by_prior,
)

_OPS = {
    "sum": ("sum", False),
    "mean": ("sum", True),
    "amax": ("max", False),
    "amin": ("min", False),
}


class ReduceTemplate(AxisTemplate):
    """A kernel whose only op is one reduction over one axis of a dense float input."""

    name = "reduce"
    kernel_file = "k_reduce.py"
    host = "ko_reduce"
    length = "n_red"
    op_consts = ("op", "mean")
    per_thread = 64
    cap_block = False

    def match(self, view: KernelView) -> TemplateMatch | None:
        found = match_axis_op(view, _OPS)
        if found is None:
            return None
        op, mean = _OPS[found.node.short]
        outer, inner, n_red = found.outer, found.inner, found.shape[found.axis]
        return TemplateMatch(
            template=self.name,
            args={"x": found.x, "y": found.out},
            consts={"outer": outer, "n_red": n_red, "inner": inner, "op": op, "mean": mean},
            what=f"{found.node.short} over an axis of {n_red} (outer {outer}, inner {inner})",
        )

    def contiguous_grid(self, outer: int, n_red: int, sm_count: int) -> list[dict[str, int]]:
        blocks = (64, 128, 256, 512, 1024, 2048, 4096)
        points = [
            {**p, "SPLIT": 1}
            for p in row_tiles(outer, n_red, blocks, max_tile=MAX_TILE, per_thread=self.per_thread)
        ]
        if outer < 4 * sm_count and n_red >= 4096:  # few long rows: split them
            for split in (4, 8, 16, 32, 64):
                if n_red // split >= 512:
                    for block in (512, 1024, 2048):
                        for warps in (4, 8):
                            points.append(
                                {"ROWS": 1, "BLOCK": block, "SPLIT": split, "num_warps": warps}
                            )
        return rank_by_prior(
            points,
            tile=lambda p: p["ROWS"] * p["BLOCK"],
            programs=lambda p: -(-outer // p["ROWS"]) * p["SPLIT"],
            sm_count=sm_count,
        )
