"""``linear`` then ReLU -> ``aten._addmm_activation``: one cuBLASLt GEMM with a bias+ReLU epilogue.

Works on the traced graph (``kernelopt.proposer.rewrites.graph.trace``) like the
algebraic rewrites.  Only an exact match is rewritten: a linear with a bias whose
one and only user is a ReLU, so nothing else reads the pre-activation value.
Inputs of rank above 2 are flattened to rows and unflattened after, as
``F.linear`` does internally.
"""

from __future__ import annotations

import operator

import torch
import torch.fx

from kernelopt.proposer.rewrites.graph import rank

_RELU_FUNCTIONS = (torch.relu, torch.nn.functional.relu)
_ADDMM_ACTIVATION = torch.ops.aten._addmm_activation.default


def _is_relu(node: torch.fx.Node, gm: torch.fx.GraphModule) -> bool:
    if node.op == "call_function":
        return node.target in _RELU_FUNCTIONS
    if node.op == "call_method":
        return node.target in ("relu", "relu_")
    if node.op == "call_module":
        return isinstance(gm.get_submodule(str(node.target)), torch.nn.ReLU)
    return False


def _linear_parts(
    node: torch.fx.Node, gm: torch.fx.GraphModule
) -> tuple[torch.fx.Node, torch.fx.Node | str, torch.fx.Node | str] | None:
    """(input, weight, bias) of a biased linear; weight/bias as a node or a module path."""
    if node.op == "call_module":
        module = gm.get_submodule(str(node.target))
        if type(module) is not torch.nn.Linear or module.bias is None or node.kwargs:
            return None
        return node.args[0], f"{node.target}.weight", f"{node.target}.bias"
    if node.op == "call_function" and node.target is torch.nn.functional.linear:
        args = [*node.args, *(node.kwargs[k] for k in ("weight", "bias") if k in node.kwargs)]
        if len(args) == 3 and all(isinstance(a, torch.fx.Node) for a in args):
            return args[0], args[1], args[2]
    return None


def addmm_relu(gm: torch.fx.GraphModule) -> list[str]:
    """Rewrite every ``relu(linear(x, w, b))`` into ``_addmm_activation(b, x, w.t())``."""
    done = []
    graph = gm.graph
    for node in list(graph.nodes):
        parts = _linear_parts(node, gm)
        if parts is None or len(node.users) != 1:
            continue
        relu = next(iter(node.users))
        if not _is_relu(relu, gm) or relu.args[0] is not node:
            continue
        x, weight, bias = parts
        x_rank = rank(x)
        if x_rank is None or x_rank < 2:
            continue  # a vector input is a GEMV, which has no epilogue to fuse
        with graph.inserting_before(relu):
            w = graph.get_attr(weight) if isinstance(weight, str) else weight
            b = graph.get_attr(bias) if isinstance(bias, str) else bias
            rows = graph.call_method("flatten", (x, 0, -2)) if x_rank > 2 else x
            wt = graph.call_method("t", (w,))
            out = graph.call_function(_ADDMM_ACTIVATION, (b, rows, wt))
            if x_rank > 2:
                shape = graph.call_function(getattr, (x, "shape"))
                lead = graph.call_function(operator.getitem, (shape, slice(None, -1, None)))
                out = graph.call_method("unflatten", (out, 0, lead))
        out.meta = dict(relu.meta)
        relu.replace_all_uses_with(out)
        graph.erase_node(relu)
        graph.erase_node(node)
        done.append("linear + ReLU -> cuBLASLt addmm with a bias+ReLU epilogue")
    return done
