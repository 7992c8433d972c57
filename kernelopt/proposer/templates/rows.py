"""Templates over whole rows of the last axis (softmax, norms): one grid serves them all.

Such a kernel reads a row once when it fits in registers (several rows per program
when they are short) and loops over blocks of a longer row, reading it twice;
its match holds ``n_rows`` and ``n_cols``.
"""

from __future__ import annotations

from kernelopt.proposer.templates.base import (
    MAX_TILE,
    Template,
    TemplateMatch,
    next_pow2,
    rank_by_prior,
)


def row_grid(n_rows: int, n_cols: int, sm_count: int) -> list[dict[str, int]]:
    """Row-kernel points: whole rows in registers (several per program when short), or
    looped blocks for rows too long to hold."""
    full = next_pow2(n_cols)
    points = []
    rows = 1
    while rows * full <= MAX_TILE and rows <= max(1, next_pow2(n_rows)):
        for warps in (1, 2, 4, 8, 16):
            per_thread = rows * full / (32 * warps)
            if 1 <= per_thread <= 64:
                points.append({"ROWS": rows, "BLOCK": full, "num_warps": warps})
        rows *= 2
    if full > 1024:
        for block in (1024, 2048, 4096):
            if block < full:
                for warps in (4, 8, 16):
                    if 1 <= block / (32 * warps) <= 64:
                        points.append({"ROWS": 1, "BLOCK": block, "num_warps": warps})
    return rank_by_prior(
        points,
        tile=lambda p: p["ROWS"] * p["BLOCK"],
        programs=lambda p: -(-n_rows // p["ROWS"]),
        sm_count=sm_count,
        extra=lambda p: 0.5 if p["BLOCK"] < n_cols else 0.0,  # a looped row is read twice
    )


class RowTemplate(Template):
    """An op over whole rows of the last axis; its grid is ``row_grid``."""

    def grid(self, match: TemplateMatch, sm_count: int) -> list[dict[str, int]]:
        return row_grid(match.consts["n_rows"], match.consts["n_cols"], sm_count)
