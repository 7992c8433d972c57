"""Algebraic identities on the traced graph; each returns what it changed ([] = nothing).

Exact in real arithmetic; in floating point the rounding may differ (a
broadcast multiply rounds once where a GEMM with a diagonal matrix sums zeros,
a sliced GEMM sums the same products), so the gates -- not these rules --
decide whether a rewritten forward is accepted.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass
from typing import Any

import torch
import torch.fx

from kernelopt.proposer.rewrites import helpers
from kernelopt.proposer.rewrites.effects import has_effects
from kernelopt.proposer.rewrites.graph import rank, shape

_MATMUL = (operator.matmul, torch.matmul, torch.mm, torch.bmm)
_MATMUL_METHODS = ("matmul", "mm", "bmm")
_DIAG = (torch.diag, torch.diag_embed)


def diag_to_broadcast(gm: torch.fx.GraphModule) -> list[str]:
    """``diag(v) @ x`` -> ``v[..., None] * x`` and ``x @ diag(v)`` -> ``x * v[..., None, :]``."""
    done = []
    graph = gm.graph
    for node in list(graph.nodes):
        if node.op != "call_function" or node.target not in _DIAG:
            continue
        if len(node.args) != 1 or node.kwargs:
            continue  # an offset or other dims: not a plain diagonal
        v = node.args[0]
        if node.target is torch.diag and rank(v) != 1:
            continue  # torch.diag of a matrix extracts its diagonal
        users = list(node.users)
        if not users or any(u.op != "call_function" or u.target not in _MATMUL for u in users):
            continue
        if any(u.target is torch.mm and rank(v) != 1 for u in users):
            continue
        for user in users:
            left, right = user.args[0], user.args[1]
            other = right if left is node else left
            if left is node and right is node:
                break
            with graph.inserting_before(user):
                if rank(other) is not None and rank(other) >= 2:
                    axis = -1 if left is node else -2
                    scale = graph.call_method("unsqueeze", (v, axis))
                else:
                    scale = v
                new = graph.call_function(operator.mul, (scale, other))
            new.meta = dict(user.meta)
            user.replace_all_uses_with(new)
            graph.erase_node(user)
            done.append(f"{node.target.__name__}(v) product -> broadcast multiply")
        if not node.users:
            graph.erase_node(node)
    return done


@dataclass(frozen=True)
class _LinearMap:
    """A node that applies one weight matrix to its first argument's last axis (and a bias).

    ``weight`` and ``bias`` are graph values, or a module attribute's path (a ``Linear``
    module's, fetched with ``get_attr`` once a rule uses it); ``feature_axis`` is the
    weight's output-feature axis (0 for ``linear``'s ``W``, 1 for a ``x @ W`` operand).
    """

    weight: Any
    bias: Any
    feature_axis: int


def _in_graph(graph: torch.fx.Graph, part: Any) -> Any:
    """A ``_LinearMap`` part as a graph value (a module attribute's path fetched here)."""
    return graph.get_attr(part) if isinstance(part, str) else part


def _linear_map(node: torch.fx.Node, gm: torch.fx.GraphModule) -> _LinearMap | None:
    """The linear map ``node`` applies (an ``nn.Linear``, ``F.linear`` or a product with a
    matrix), else None."""
    if node.op == "call_module":
        module = gm.get_submodule(str(node.target))
        if not isinstance(module, torch.nn.Linear) or len(node.args) != 1 or node.kwargs:
            return None
        bias = f"{node.target}.bias" if module.bias is not None else None
        return _LinearMap(f"{node.target}.weight", bias, 0)
    if node.op == "call_function" and node.target is torch.nn.functional.linear:
        if node.kwargs or len(node.args) not in (2, 3):
            return None
        return _LinearMap(node.args[1], node.args[2] if len(node.args) == 3 else None, 0)
    if _product(node) and rank(node.args[1]) == 2:
        return _LinearMap(node.args[1], None, 1)
    return None


def _row_index(index: Any, out_rank: int) -> bool:
    """An index that only picks along leading axes (ints and slices, last axis untouched)."""
    items = index if isinstance(index, tuple) else (index,)
    if not all(isinstance(i, (int, slice)) and not isinstance(i, bool) for i in items):
        return False
    if len(items) < out_rank:
        return True
    return len(items) == out_rank and items[-1] == slice(None, None, None)


def slice_before_linear(gm: torch.fx.GraphModule) -> list[str]:
    """``linear(x)[idx]`` -> ``linear(x[idx])`` when ``idx`` leaves the feature axis alone."""
    done = []
    graph = gm.graph
    for node in list(graph.nodes):
        if node.op != "call_function" or node.target is not operator.getitem:
            continue
        producer, index = node.args
        if not isinstance(producer, torch.fx.Node) or len(producer.users) != 1:
            continue
        if _linear_map(producer, gm) is None:
            continue
        x = producer.args[0]
        out_rank = rank(producer)
        if out_rank is None or out_rank < 2 or rank(x) != out_rank:
            continue
        if not _row_index(index, out_rank):
            continue
        with graph.inserting_before(producer):
            picked = graph.call_function(operator.getitem, (x, index))
        producer.args = (picked, *producer.args[1:])
        node.replace_all_uses_with(producer)
        graph.erase_node(node)
        producer.meta = dict(node.meta)
        done.append("index pushed before a linear/matmul")
    return done


def dead_code(gm: torch.fx.GraphModule) -> list[str]:
    """Computation whose result nothing uses, and that has no effect besides its result.

    FX's own test of purity keeps side-effectful functions, but not in-place methods
    (``x.mul_(2)``), augmented assignments, ``inplace=True`` layers or random draws
    (whose removal shifts every later draw); ``_has_effects`` keeps those too, from the
    ATen ops each node ran in the shape pass (``effects``), not from its name.
    """
    before = list(gm.graph.nodes)
    gm.graph.eliminate_dead_code(is_impure_node=_has_effects)
    kept = set(gm.graph.nodes)
    removed = [n for n in before if n not in kept]
    # an unused shape entry (``b, _, d = x.shape``) costs nothing: no candidate for it alone
    computed = [n for n in removed if "tensor_meta" in n.meta]
    return [f"{len(removed)} dead node(s) removed"] if computed else []


_AUGMENTED = {
    operator.iadd, operator.isub, operator.imul, operator.itruediv, operator.ifloordiv,
    operator.imod, operator.ipow, operator.imatmul, operator.iand, operator.ior,
    operator.ixor, operator.ilshift, operator.irshift, operator.setitem, operator.delitem,
}  # fmt: skip


def _has_effects(node: torch.fx.Node) -> bool:
    """Whether removing ``node`` could change anything besides its own (unused) result."""
    if node.is_impure() or (node.op == "call_function" and node.target in _AUGMENTED):
        return True
    return node.op in ("call_function", "call_method", "call_module") and has_effects(node)


def _triangle(node: Any) -> str | None:
    """'tril' or 'triu' when ``node`` masks its input to the main diagonal's triangle."""
    if not isinstance(node, torch.fx.Node):
        return None
    if node.op == "call_method" and node.target in ("tril", "triu"):
        name = str(node.target)
    elif node.op == "call_function" and node.target in (torch.tril, torch.triu):
        name = node.target.__name__
    else:
        return None
    diagonal = node.args[1] if len(node.args) > 1 else node.kwargs.get("diagonal", 0)
    if diagonal != 0 or set(node.kwargs) - {"diagonal"}:
        return None
    return name


def _product(node: Any, *, vector: bool = False) -> bool:
    """A plain matrix product of two operands of rank 2 or more (with ``vector``, one of them
    may be a vector)."""
    if not isinstance(node, torch.fx.Node) or len(node.args) != 2 or node.kwargs:
        return False
    function = node.op == "call_function" and node.target in _MATMUL
    method = node.op == "call_method" and node.target in _MATMUL_METHODS
    ranks = [rank(arg) or 0 for arg in node.args]
    return (function or method) and min(ranks) >= (1 if vector else 2) and max(ranks) >= 2


def _call_instead(graph: torch.fx.Graph, node: torch.fx.Node, fn: Any, args: tuple) -> None:
    """``fn(*args)`` takes ``node``'s place (and its shape metadata) in ``graph``."""
    with graph.inserting_before(node):
        new = graph.call_function(fn, args)
    new.meta = dict(node.meta)
    node.replace_all_uses_with(new)
    graph.erase_node(node)


def triangular_products(gm: torch.fx.GraphModule) -> list[str]:
    """``tril(a) @ tril(b)`` (or both ``triu``) -> a blocked product that skips the zero
    blocks, likewise a product with one triangular side, and ``tril(x @ y)`` (or ``triu``)
    -> one that never computes the masked-off output blocks (``helpers``; dense below
    ``TRIANGULAR_LEAF``)."""
    done = []
    graph = gm.graph
    leaf = helpers.TRIANGULAR_LEAF
    for node in list(graph.nodes):
        if not _product(node):
            continue
        left, right = (_triangle(arg) for arg in node.args)
        if left is not None and left == right:
            args = (*node.args, left == "tril", leaf)
            _call_instead(graph, node, helpers._ko_triangular_product, args)
            done.append(f"{left} x {left} product -> blocked triangular product")
        elif left is not None:
            args = (*node.args, left == "tril", leaf)
            _call_instead(graph, node, helpers._ko_triangular_times_dense, args)
            done.append(f"{left} x matrix product -> blocked, zero block skipped")
        elif right is not None:
            args = (*node.args, right == "tril", leaf)
            _call_instead(graph, node, helpers._ko_dense_times_triangular, args)
            done.append(f"matrix x {right} product -> blocked, zero block skipped")
    for node in list(graph.nodes):
        kind = _triangle(node)
        product = node.args[0] if kind else None
        if _product(product) and len(product.users) == 1:
            args = (*product.args, kind == "tril", leaf)
            _call_instead(graph, node, helpers._ko_masked_product, args)
            graph.erase_node(product)
            done.append(f"{kind}(product) -> product of the kept blocks only")
    return done


_REDUCTIONS = {torch.sum: "sum", torch.mean: "mean"}


def _reduction(node: torch.fx.Node) -> tuple[str, int, bool] | None:
    """``(sum | mean, axis, keepdim)`` for a one-axis sum or mean, else None."""
    if node.op == "call_method" and node.target in ("sum", "mean"):
        name = str(node.target)
    elif node.op == "call_function" and node.target in _REDUCTIONS:
        name = _REDUCTIONS[node.target]
    else:
        return None
    if set(node.kwargs) - {"dim", "keepdim"} or len(node.args) > 3:
        return None
    dim = node.args[1] if len(node.args) > 1 else node.kwargs.get("dim")
    keepdim = node.args[2] if len(node.args) > 2 else node.kwargs.get("keepdim", False)
    if isinstance(dim, (tuple, list)) and len(dim) == 1:
        dim = dim[0]
    out_rank = rank(node.args[0])
    if not isinstance(dim, int) or isinstance(dim, bool) or out_rank is None:
        return None
    if not -out_rank <= dim < out_rank or not isinstance(keepdim, bool):
        return None
    return name, dim % out_rank, keepdim


def reduce_before_linear(gm: torch.fx.GraphModule) -> list[str]:
    """A sum or mean of a linear map's output, moved before the map.

    Over the output features: ``sum_j (x W^T + b)_j = x (sum_j W_j) + sum_j b_j``, a
    matrix-vector product instead of a GEMM.  Over a row axis: the rows are reduced first
    (``sum_i x_i W^T + n b``), so the GEMM has one row where it had ``n``.
    """
    done = []
    graph = gm.graph
    for node in list(graph.nodes):
        found = _reduction(node)
        producer = node.args[0] if found else None
        if not isinstance(producer, torch.fx.Node) or len(producer.users) != 1:
            continue
        name, axis, keepdim = found
        linear = _linear_map(producer, gm)  # None for a placeholder: it has no args
        if linear is None:
            continue
        out_rank, x = rank(producer), producer.args[0]
        if out_rank is None or out_rank < 2 or rank(x) != out_rank:
            continue
        feature_axis = linear.feature_axis
        with graph.inserting_before(node):
            weight, bias = _in_graph(graph, linear.weight), _in_graph(graph, linear.bias)
            if axis == out_rank - 1:  # over the output features
                reduced_w = graph.call_method(name, (weight, feature_axis))
                new = graph.call_function(operator.matmul, (x, reduced_w))
                if bias is not None:
                    new = graph.call_function(operator.add, (new, graph.call_method(name, (bias,))))
                if keepdim:
                    new = graph.call_method("unsqueeze", (new, -1))
                what = "over the output features"
            else:  # over a row axis: the weight is shared by every row
                reduced_x = graph.call_method(name, (x, axis, keepdim))
                if feature_axis == 0:
                    new = graph.call_function(torch.nn.functional.linear, (reduced_x, weight))
                else:
                    new = graph.call_function(operator.matmul, (reduced_x, weight))
                if bias is not None:  # a mean adds the bias once, a sum once per row
                    if name == "sum":
                        rows = graph.call_method("size", (x, axis))
                        bias = graph.call_function(operator.mul, (bias, rows))
                    new = graph.call_function(operator.add, (new, bias))
                what = "over a row axis"
        new.meta = dict(node.meta)
        node.replace_all_uses_with(new)
        graph.erase_node(node)
        graph.erase_node(producer)
        done.append(f"{name} {what} moved before the linear map")
    return done


def _chain_cost(a: tuple[int, ...], b: tuple[int, ...], c: tuple[int, ...]) -> tuple[int, int]:
    """Multiply-adds of ``(a @ b) @ c`` and of ``a @ (b @ c)`` for matrices (a 1-D end is a
    vector: one row or one column), the batch counted once."""
    m = a[-2] if len(a) >= 2 else 1
    k, n = b[-2], b[-1]
    p = c[-1] if len(c) >= 2 else 1
    batch = 1
    for dim in torch.broadcast_shapes(a[:-2], b[:-2], c[:-2]):
        batch *= dim
    return batch * (m * k * n + m * n * p), batch * (k * n * p + m * k * p)


def reassociate_products(gm: torch.fx.GraphModule) -> list[str]:
    """``(a @ b) @ c`` <-> ``a @ (b @ c)``, whichever the traced shapes make cheaper by at
    least half: a product with a vector or a thin matrix goes first (the chain's result is
    the same in any order; only the rounding differs)."""
    done = []
    graph = gm.graph
    for node in list(graph.nodes):
        if not _product(node, vector=True):
            continue
        left, right = node.args
        for inner, outer_is_right in ((left, False), (right, True)):
            if not _product(inner) or len(inner.users) != 1:
                continue
            a, b, c = (*inner.args, right) if not outer_is_right else (left, *inner.args)
            shapes = [shape(x) for x in (a, b, c)]
            if any(s is None or len(s) < 1 for s in shapes) or len(shapes[1]) < 2:
                continue
            as_is, other = _chain_cost(*shapes)
            if outer_is_right:
                as_is, other = other, as_is
            if 2 * other > as_is:
                continue
            with graph.inserting_before(node):
                if outer_is_right:  # a @ (b @ c) -> (a @ b) @ c
                    first = graph.call_function(operator.matmul, (a, b))
                    new = graph.call_function(operator.matmul, (first, c))
                else:  # (a @ b) @ c -> a @ (b @ c)
                    first = graph.call_function(operator.matmul, (b, c))
                    new = graph.call_function(operator.matmul, (a, first))
            new.meta = dict(node.meta)
            node.replace_all_uses_with(new)
            graph.erase_node(node)
            graph.erase_node(inner)
            done.append(f"product chain reordered: {as_is} -> {other} multiply-adds")
            break
    return done
