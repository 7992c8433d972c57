"""Templates for one op along any axis of a dense float input: reductions and scans.

Both match through ``base.match_axis_op`` (one op, one axis, contiguous floats),
tile a strided axis as ``[BLOCK (along the axis), BLOCK_K (contiguous)]`` and hand
their host function the shape around the axis, their own constants, then every
knob by name; they differ in the op, the grid of a contiguous axis and how much
one thread holds.
"""

from __future__ import annotations

from abc import abstractmethod
from typing import ClassVar

from kernelopt.proposer.templates.base import Template, TemplateMatch, next_pow2, rank_by_prior


def strided_tiles(
    outer: int, n_axis: int, inner: int, sm_count: int, *, per_thread: int, cap_block: bool
) -> list[dict[str, int]]:
    """Ranked ``[BLOCK (along the axis), BLOCK_K (contiguous)]`` tiles for a strided axis.

    ``cap_block`` skips blocks far longer than the axis (a scan's carry loop gains nothing
    from them); ``per_thread`` bounds the elements one thread holds.
    """
    points: list[dict[str, int]] = []
    for block_k in (16, 32, 64, 128, 256):
        if block_k > next_pow2(inner) * 2:
            continue
        for block in (4, 8, 16, 32, 64):
            if cap_block and block > next_pow2(n_axis) * 2:
                continue
            for warps in (2, 4, 8):
                if 1 <= block * block_k / (32 * warps) <= per_thread:
                    points.append({"BLOCK": block, "BLOCK_K": block_k, "num_warps": warps})
    return rank_by_prior(
        points,
        tile=lambda p: p["BLOCK"] * p["BLOCK_K"],
        programs=lambda p: outer * -(-inner // p["BLOCK_K"]),
        sm_count=sm_count,
    )


def row_tiles(
    outer: int, n_axis: int, blocks: tuple[int, ...], *, max_tile: int, per_thread: int
) -> list[dict[str, int]]:
    """``ROWS`` rows of ``BLOCK`` elements per program, unranked: a contiguous axis."""
    points: list[dict[str, int]] = []
    full = next_pow2(n_axis)
    for block in sorted({min(b, full) for b in blocks}):
        rows = 1
        while rows * block <= max_tile and rows <= next_pow2(outer):
            for warps in (1, 2, 4, 8, 16):
                if 1 <= rows * block / (32 * warps) <= per_thread:
                    points.append({"ROWS": rows, "BLOCK": block, "num_warps": warps})
            rows *= 2
    return points


class AxisTemplate(Template):
    """One op along one axis: its match holds ``outer``, the axis length and ``inner``."""

    host: ClassVar[str]  # the kernel module's host function that ``launch`` calls
    length: ClassVar[str]  # the const holding the axis's length
    op_consts: ClassVar[tuple[str, ...]]  # the op's own consts, passed after the shape
    per_thread: ClassVar[int]  # the most elements one thread holds
    cap_block: ClassVar[bool]  # skip strided blocks far longer than the axis

    @abstractmethod
    def contiguous_grid(self, outer: int, n_axis: int, sm_count: int) -> list[dict[str, int]]:
        """The ranked points when the axis is the last (contiguous) one."""

    def grid(self, match: TemplateMatch, sm_count: int) -> list[dict[str, int]]:
        c = match.consts
        outer, n_axis, inner = c["outer"], c[self.length], c["inner"]
        if inner > 1:  # strided axis: tiles of [BLOCK (along it), BLOCK_K (contiguous)]
            return strided_tiles(
                outer, n_axis, inner, sm_count, per_thread=self.per_thread, cap_block=self.cap_block
            )
        return self.contiguous_grid(outer, n_axis, sm_count)

    def call(self, match: TemplateMatch, params: dict[str, int]) -> str:
        a, c = match.args, match.consts
        shape = [c["outer"], c[self.length], c["inner"]]
        values = [repr(v) for v in (*shape, *(c[k] for k in self.op_consts))]
        knobs = [f"{k}={params[k]}" for k in sorted(params)]
        return f"{self.host}(args[{a['x']}], args[{a['y']}], {', '.join(values + knobs)})"
