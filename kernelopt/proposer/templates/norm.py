"""Layer-norm / RMS-norm template: recognises the decomposed normalisations Inductor fuses."""

from __future__ import annotations

import math
from collections import Counter
from typing import Any

from kernelopt.proposer.fragment import FxNode, Ref
from kernelopt.proposer.templates.base import KernelView, TemplateMatch, dense_io, reduced_axis
from kernelopt.proposer.templates.rows import RowTemplate


def _literal(node: FxNode) -> float | None:
    """The one numeric literal among a node's arguments (eps in ``add(var, eps)``)."""
    values = [a for a in node.args if isinstance(a, (int, float)) and not isinstance(a, bool)]
    return float(values[0]) if len(values) == 1 else None


class NormTemplate(RowTemplate):
    """Layer norm (``var_mean`` form) or RMS norm (``mean(x*x)`` form) over the last axis."""

    name = "norm"
    kernel_file = "k_norm.py"

    def match(self, view: KernelView) -> TemplateMatch | None:
        ops = view.fragment.op_counts()
        rms = "var_mean" not in ops
        square_op = ""
        reducer = view.fragment.first("mean" if rms else "var_mean")
        out = view.only_output()
        if reducer is None or out is None or not reducer.args:
            return None
        x = view.arg_for(reducer.args[0])
        x_node = view.node(reducer.args[0])
        if rms:  # mean(x * x) / mean(x ** 2): the square must be of the normalised input itself
            square = view.node(reducer.args[0])
            if square is None or not _is_square(square):
                return None
            square_op = square.short
            x = view.arg_for(square.args[0])
            x_node = view.node(square.args[0])
        if x is None or x_node is None or x_node.shape is None:
            return None
        n_cols = x_node.shape[-1]
        affine = self._affine(view, n_cols, x)
        if affine is None:
            return None
        weight, bias = affine
        expected = _expected(square_op, weight is not None, bias is not None)
        if ops != expected:
            return None
        if not rms and reducer.kwargs.get("correction", "") != "0":
            return None  # an unbiased variance is not a layer norm
        eps_nodes = [
            n for n in view.fragment.calls() if n.short == "add" and _literal(n) is not None
        ]
        if len(eps_nodes) != 1:
            return None
        axis = reduced_axis(reducer.args[1] if len(reducer.args) > 1 else None, len(x_node.shape))
        y_spec = view.args[out].tensor
        stored = view.stored_node(out)
        if (
            axis != len(x_node.shape) - 1
            or stored is None
            or stored.shape != x_node.shape
            or not dense_io(x_node, y_spec)
        ):
            return None
        args = {"x": x, "y": out}
        if weight is not None:
            args["w"] = weight
        if bias is not None:
            args["b"] = bias
        n_rows = max(1, math.prod(x_node.shape) // max(1, n_cols))
        return TemplateMatch(
            template=self.name,
            args=args,
            consts={"n_cols": n_cols, "n_rows": n_rows, "eps": _literal(eps_nodes[0]), "rms": rms},
            what=f"{'RMS' if rms else 'layer'} norm over rows of {n_cols}",
        )

    def _affine(self, view: KernelView, n_cols: int, x: int) -> tuple[Any, Any] | None:
        """(weight arg, bias arg): other inputs of shape [n_cols] used by a mul / an add."""
        weight = bias = None
        for i in view.tensor_args("in"):
            if i == x:
                continue
            spec = view.args[i].tensor
            node = view.fragment.placeholder_for(view.args[i].expr)
            if spec is None or node is None or spec.shape != [n_cols] or spec.stride != [1]:
                return None
            users = [n for n in view.fragment.calls() if Ref(node.name) in n.args]
            kinds = {n.short for n in users}
            if kinds == {"mul"} and weight is None:
                weight = i
            elif kinds == {"add"} and bias is None:
                bias = i
            else:
                return None
        return weight, bias

    def call(self, match: TemplateMatch, params: dict[str, int]) -> str:
        a, c = match.args, match.consts
        w = f"args[{a['w']}]" if "w" in a else "None"
        b = f"args[{a['b']}]" if "b" in a else "None"
        return (
            f"ko_norm(args[{a['x']}], {w}, {b}, args[{a['y']}], {c['n_cols']}, {c['eps']!r}, "
            f"{c['rms']}, ROWS={params['ROWS']}, BLOCK={params['BLOCK']}, "
            f"num_warps={params['num_warps']})"
        )


def _is_square(node: FxNode) -> bool:
    if node.short == "pow":
        return len(node.args) == 2 and node.args[1] in (2, 2.0)
    return node.short == "mul" and len(node.args) == 2 and node.args[0] == node.args[1]


def _expected(square_op: str, weight: bool, bias: bool) -> Counter[str]:
    """The exact op multiset of the matched form ('' square: layer norm)."""
    if square_op:  # square, mean, add eps, rsqrt, x * rstd (* weight) (+ bias)
        return Counter(mean=1, add=1 + bias, rsqrt=1, mul=1 + weight) + Counter({square_op: 1})
    return Counter(var_mean=1, sub=1, add=1 + bias, rsqrt=1, mul=1 + weight)
