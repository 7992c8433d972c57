"""Row softmax / log-softmax template: recognises Inductor's softmax decompositions."""

from __future__ import annotations

from collections import Counter

from kernelopt.proposer.templates.base import (
    FLOAT_DTYPES,
    MAX_TILE,
    KernelView,
    Template,
    TemplateMatch,
    contiguous,
    dtype_name,
    next_pow2,
    rank_by_prior,
    reduced_axis,
)

# the ATen op multisets softmax reaches Inductor as (online pass, plain decomposition, op)
SOFTMAX_FORMS = (
    Counter(prepare_softmax_online=1, sub=1, exp=1, div=1),
    Counter(amax=1, sub=1, exp=1, sum=1, div=1),
    Counter(_softmax=1),
)
LOG_SOFTMAX_FORMS = (
    Counter(prepare_softmax_online=1, sub=2, log=1),
    Counter(amax=1, sub=2, exp=1, sum=1, log=1),
    Counter(_log_softmax=1),
)
_REDUCERS = ("prepare_softmax_online", "amax", "_softmax", "_log_softmax")


class SoftmaxTemplate(Template):
    """Softmax or log-softmax over the last axis of a dense float tensor."""

    name = "softmax"
    kernel_file = "k_softmax.py"

    def match(self, view: KernelView) -> TemplateMatch | None:
        ops = view.fragment.op_counts()
        if ops in SOFTMAX_FORMS:
            log, final = False, ("div", "_softmax")
        elif ops in LOG_SOFTMAX_FORMS:
            log, final = True, ("sub", "_log_softmax")
        else:
            return None
        reducer = next(n for n in view.fragment.calls() if n.short in _REDUCERS)
        x = view.arg_for(reducer.args[0] if reducer.args else None)
        out = view.only_output()
        if x is None or out is None or len(view.tensor_args("in")) != 1:
            return None
        x_node = view.node(reducer.args[0])
        stored = view.stored_node(out)
        if x_node is None or x_node.shape is None or stored is None or stored.short not in final:
            return None
        axis = reduced_axis(reducer.args[1] if len(reducer.args) > 1 else None, len(x_node.shape))
        x_spec, y_spec = view.args[x].tensor, view.args[out].tensor
        if (
            axis != len(x_node.shape) - 1
            or stored.shape != x_node.shape
            or not contiguous(x_node.shape, x_node.stride)
            or x_spec is None
            or y_spec is None
            or not contiguous(y_spec.shape, y_spec.stride)
            or dtype_name(x_node.dtype) not in FLOAT_DTYPES
            or y_spec.dtype not in FLOAT_DTYPES
        ):
            return None
        n_cols = x_node.shape[-1]
        rows = max(1, _numel(x_node.shape) // max(1, n_cols))
        return TemplateMatch(
            template=self.name,
            args={"x": x, "y": out},
            consts={"n_cols": n_cols, "n_rows": rows, "log": log},
            what=f"{'log-' if log else ''}softmax over rows of {n_cols}",
        )

    def grid(self, match: TemplateMatch, sm_count: int) -> list[dict[str, int]]:
        return row_grid(match.consts["n_rows"], match.consts["n_cols"], sm_count)

    def call(self, match: TemplateMatch, params: dict[str, int]) -> str:
        a, c = match.args, match.consts
        return (
            f"ko_softmax(args[{a['x']}], args[{a['y']}], {c['n_cols']}, {c['log']}, "
            f"ROWS={params['ROWS']}, BLOCK={params['BLOCK']}, num_warps={params['num_warps']})"
        )


def _numel(shape: list[int]) -> int:
    n = 1
    for s in shape:
        n *= s
    return n


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
