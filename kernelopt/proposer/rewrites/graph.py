"""Trace a problem's ``Model`` into an FX graph and write a rewritten graph back as ``ModelNew``.

A rewrite works on ``torch.fx.symbolic_trace`` of the user's own module (the
graph before Inductor), with shapes from a fake-tensor propagation so nothing
is computed (the same pass notes what each node does besides its result).  The
candidate is the problem file followed by ``class ModelNew(Model)`` whose
``forward`` is the rewritten graph's code: it inherits the constructor, so
parameters keep their names and creation order and the captured weights load
into it (the forward form of the candidate contract).
"""

from __future__ import annotations

import builtins
import importlib
import inspect
import re
import textwrap
import types
import warnings
from typing import Any

import torch
import torch.fx

from kernelopt.errors import DeterministicError
from kernelopt.proposer.rewrites.effects import EffectProp
from kernelopt.proposer.rewrites.helpers import HELPERS

HEADER = "# kernelopt rewrite: "


class RewriteError(DeterministicError):
    """The model cannot be traced or its rewritten graph cannot be written as source."""


def load_namespace(source: str, name: str = "kernelopt_problem") -> types.ModuleType:
    """The problem file executed as a fresh module (defines Model, get_inputs, ...)."""
    module = types.ModuleType(name)
    exec(compile(source, f"<{name}>", "exec"), module.__dict__)
    return module


def trace(source: str, seed: int = 0) -> tuple[torch.fx.GraphModule, types.ModuleType]:
    """The traced model, with ``tensor_meta`` and the node's effects besides its result
    (``effects.EFFECTS``) on every node, from a fake-tensor pass."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    ns = load_namespace(source)
    if not hasattr(ns, "Model"):
        raise RewriteError("the problem defines no Model")
    torch.manual_seed(seed)
    init = list(ns.get_init_inputs()) if hasattr(ns, "get_init_inputs") else []
    model = ns.Model(*init)
    with torch.random.fork_rng():
        drawn = list(ns.get_inputs())
    try:
        gm = torch.fx.symbolic_trace(model)
    except Exception as exc:  # FX raises many types for untraceable Python
        gm = _trace_at_shapes(model, drawn, ns, f"{type(exc).__name__}: {exc}")
    fake = FakeTensorMode(allow_non_fake_inputs=True)
    inputs = [fake.from_tensor(t) if isinstance(t, torch.Tensor) else t for t in drawn]
    prop = EffectProp(gm, fake_mode=fake)
    try:
        prop.propagate(*inputs)
    except Exception as exc:  # shape propagation runs arbitrary ops
        raise RewriteError(_propagation_failure(exc, prop.running)) from None
    return gm, ns


def _propagation_failure(exc: Exception, node: torch.fx.Node | None) -> str:
    """One line for a failed shape propagation: the node and the root error's first line,
    not FX's multi-line wrapper (it repeats the node twice and ends with a traceback hint)."""
    root = exc.__cause__ or exc
    first = next((line for line in str(root).splitlines() if line.strip()), "")
    where = (
        f" at {node.name} ({node.op} {getattr(node.target, '__name__', node.target)})"
        if node
        else ""
    )
    return f"shape propagation failed{where}: {type(root).__name__}: {first}"[:300]


def _trace_at_shapes(
    model: torch.nn.Module, drawn: list[Any], ns: types.ModuleType, why: str
) -> torch.fx.GraphModule:
    """A forward FX cannot trace symbolically (shapes used as ints: ``x[:, :n]``,
    ``range(x.shape[0])``), traced with its input shapes known (FX's meta tracer), where
    the graph does not depend on them: traced at every input shape the problem declares
    (``get_holdout_inputs``), the code must come out the same, else shapes are baked in
    and the rewrite would hold for the main shapes alone."""
    from torch.fx.experimental.meta_tracer import symbolic_trace as meta_trace

    params = inspect.signature(model.forward).parameters.values()
    names = [p.name for p in params]
    if len(names) != len(drawn) or any(
        p.kind not in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) for p in params
    ):
        raise RewriteError(f"not traceable by torch.fx: {why}")
    shapes = [drawn]
    if hasattr(ns, "get_holdout_inputs"):
        with torch.random.fork_rng():
            shapes += [list(held) for held in ns.get_holdout_inputs()]
    codes = []
    for values in shapes:
        meta = {n: v.to("meta") for n, v in zip(names, values, strict=True) if _tensor(v)}
        concrete = {n: v for n, v in zip(names, values, strict=True) if not _tensor(v)}
        try:
            with warnings.catch_warnings():  # modules left on the CPU: metadata is skipped
                warnings.simplefilter("ignore")
                traced = meta_trace(model, meta_args=meta, concrete_args=concrete or None)
        except Exception as exc:  # the meta tracer runs the user's Python too
            raise RewriteError(
                f"not traceable by torch.fx ({why}), nor at its input shapes "
                f"({type(exc).__name__}: {exc})"
            ) from None
        codes.append(traced.code)
        if len(codes) == 1:
            gm = torch.fx.GraphModule(model, traced.graph)
    if any(code != codes[0] for code in codes):
        raise RewriteError(
            f"not traceable by torch.fx ({why}); traced at its input shapes, the forward "
            "differs between them (shapes used as numbers are baked in)"
        )
    return gm


def _tensor(value: Any) -> bool:
    return isinstance(value, torch.Tensor)


def shape(node: Any) -> tuple[int, ...] | None:
    """The traced shape of an FX value (None when unknown or not a tensor)."""
    if not isinstance(node, torch.fx.Node):
        return None
    found = getattr(node.meta.get("tensor_meta"), "shape", None)
    return tuple(int(d) for d in found) if found is not None else None


def rank(node: Any) -> int | None:
    """The tensor rank of an FX value (None when unknown or not a tensor)."""
    found = shape(node)
    return len(found) if found is not None else None


def _torch_path(obj: Any) -> str | None:
    """The dotted torch name of a global the generated code uses (a type annotation, which
    FX keeps as text such as ``"torch.Tensor"``, or a function), when importing that name
    gives the object back; else None."""
    if isinstance(obj, str):
        module, _, qualname = obj.rpartition(".")
    else:
        module, qualname = getattr(obj, "__module__", None), getattr(obj, "__qualname__", None)
    if not isinstance(module, str) or not isinstance(qualname, str):
        return None
    if module.split(".")[0] != "torch" or "<" in qualname:
        return None
    try:
        found: Any = importlib.import_module(module)
        for part in qualname.split("."):
            found = getattr(found, part)
    except (ImportError, AttributeError):
        return None
    return f"{module}.{qualname}" if isinstance(obj, str) or found is obj else None


def model_new_source(problem_source: str, gm: torch.fx.GraphModule, done: list[str]) -> str:
    """The problem file plus ``ModelNew(Model)`` running the rewritten graph."""
    gm.graph.lint()
    gm.recompile()
    code = gm.graph.python_code(root_module="self")
    known = set(vars(builtins)) | {"torch", "operator", "inf", "nan", "NoneType", "device"}
    used = set(re.findall(r"[A-Za-z_]\w*", code.src))  # globals FX registers but never uses
    called = {
        name: fn
        for name, fn in code.globals.items()
        if name in used and any(fn is helper for helper in HELPERS)
    }
    needed = sorted(k for k in code.globals if k not in known and k in used and k not in called)
    paths = {k: _torch_path(code.globals[k]) for k in needed}
    unknown = [k for k, path in paths.items() if path is None]
    if unknown:
        raise RewriteError(f"rewritten forward needs globals we cannot write: {unknown}")
    imports = sorted({str(path).rsplit(".", 1)[0] for path in paths.values()} - {"torch"})
    named = "".join(f"import {m}  # noqa: E402\n" for m in imports) + "".join(
        f"{k} = {path}\n" for k, path in paths.items()
    )
    body = textwrap.indent(code.src.strip(), "    ")
    # the helpers' own source, under the names the generated forward calls them by
    helper_text = "".join(
        f"{inspect.getsource(fn).strip()}\n\n\n{name} = {fn.__name__}\n\n\n"
        for name, fn in sorted(called.items())
    )
    return (
        f"{HEADER}{'; '.join(done)}\n{problem_source.rstrip()}\n\n\n"
        "import operator  # noqa: E402  (the rewritten forward may use it)\n"
        "from math import inf, nan  # noqa: E402\n\n\n"
        f"{named + chr(10) + chr(10) if named else ''}"
        f"{helper_text}"
        "class ModelNew(Model):\n"
        '    """Model with an algebraically rewritten forward (same parameters)."""\n\n'
        f"{body}\n"
    )
