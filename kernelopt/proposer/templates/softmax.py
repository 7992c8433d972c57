"""Row softmax / log-softmax template: recognises Inductor's softmax decompositions."""

from __future__ import annotations

import math
from collections import Counter

from kernelopt.proposer.templates.base import KernelView, TemplateMatch, dense_io, reduced_axis
from kernelopt.proposer.templates.rows import RowTemplate

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


class SoftmaxTemplate(RowTemplate):
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
            or x_spec is None
            or not dense_io(x_node, y_spec)
        ):
            return None
        n_cols = x_node.shape[-1]
        rows = max(1, math.prod(x_node.shape) // max(1, n_cols))
        return TemplateMatch(
            template=self.name,
            args={"x": x, "y": out},
            consts={"n_cols": n_cols, "n_rows": rows, "log": log},
            what=f"{'log-' if log else ''}softmax over rows of {n_cols}",
        )

    def call(self, match: TemplateMatch, params: dict[str, int]) -> str:
        a, c = match.args, match.consts
        return (
            f"ko_softmax(args[{a['x']}], args[{a['y']}], {c['n_cols']}, {c['log']}, "
            f"ROWS={params['ROWS']}, BLOCK={params['BLOCK']}, num_warps={params['num_warps']})"
        )
