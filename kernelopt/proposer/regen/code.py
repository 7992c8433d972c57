"""One Inductor compile of a module problem's forward, and the code it generates."""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from kernelopt.compile import vector_isa
from kernelopt.errors import DeterministicError

# candidates written before ``forward.ForwardPlan`` import forward_results from here
from kernelopt.proposer.regen.forward import (  # noqa: F401
    TREE,
    ForwardPlan,
    argument_reader,
    forward_results,
    forward_scope,
    wrapped_args,
)

# Inductor's config is process-global and Dynamo's caches too: one regeneration at a time
_LOCK = threading.Lock()


class RegenError(DeterministicError):
    """Inductor produced no code for the forward under the given options."""


def normalised(sources: Sequence[str]) -> str:
    """Generated code without comment lines (Inductor numbers its graphs in them)."""
    text = "\n".join(sources)
    return "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("#"))


def digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


@dataclass(frozen=True)
class Regenerated:
    """One Inductor compile of the forward: its wrapper and how to call it from ``forward``.

    ``args`` are Dynamo's sources of the graph's inputs (``L['self']._parameters['w']``,
    ``L['x']``, ``L['x'].size()[0]``): Python expressions over ``forward``'s locals, so
    the candidate hands the wrapper its own parameters and inputs, as Dynamo does.
    """

    wrapper: str
    args: list[str]
    signature: list[Any]
    output: str  # how forward returns its results: ``output_form``
    names: list[str]  # forward's input names, the keys of ``L`` besides ``self``
    training: bool  # the module mode it was compiled in (batch-norm, dropout differ)
    # the forward's results among the wrapper's outputs and arguments, and the outputs it
    # stores on its module (kernelopt.compile.output_layout)
    picks: list[Any] = field(default_factory=list)
    state: dict[int, str] = field(default_factory=dict)
    # per argument: "dtype@device" where the graph takes a Python number as a 0-d tensor
    # (a float the dynamic compile left unspecialised), else None
    wraps: list[str | None] = field(default_factory=list)
    # the tuple type the forward returns where it is a named one: source that builds it
    # from the results' tuple in the candidate's module (``result_type``), else None
    result_type: str | None = None
    # the Python constants the forward returns as they are (a label, a dtype), which no
    # graph output carries: ``output_layout.Constant`` texts, picked as ("constant", i)
    constants: list[list[str]] = field(default_factory=list)

    @property
    def code(self) -> str:
        return normalised([self.wrapper])


def _source_name(node: Any) -> str:
    grapharg = node.meta.get("grapharg")
    source = getattr(grapharg, "source", None)
    if source is None:
        raise RegenError(f"graph input {node.name} has no source in the module")
    name = source.name  # a property in newer torch, a method in older
    return name if isinstance(name, str) else name()


def input_signature(values: Sequence[Any]) -> list[Any]:
    """What the static wrapper was compiled for: each tensor's shape, stride and dtype."""
    import torch

    return [
        [list(v.shape), list(v.stride()), str(v.dtype), v.device.type]
        if isinstance(v, torch.Tensor)
        else None
        for v in values
    ]


def regenerate(
    source: str, seed: int, device: str, options: dict[str, Any], dynamic: bool = False
) -> Regenerated:
    """Inductor's wrapper for the problem's forward under ``options``.

    Compiled as the baseline is (one graph, no grad, the gates' numerics) on the
    problem's seeded model and inputs, then loaded and called once through the same
    argument expressions the candidate uses, so a candidate that cannot call its own
    wrapper is never offered.  The dynamic-shape wrapper serves every other shape, so it
    gives each size a symbol of its own (no duck sizing: two sizes equal in the compiled
    inputs need not be equal in a held-out set; no size specialised for being 1: a batch
    of one is not the held-out batch) and is called on the other shapes the gates feed.
    """
    import torch
    import torch.fx.experimental._config as shape_config
    from torch._inductor.compile_fx import compile_fx
    from torch._inductor.utils import run_and_get_code
    from torch.utils._pytree import tree_leaves

    from kernelopt.compile.output_layout import FirstCall, output_layout
    from kernelopt.precision import strict_fp32
    from kernelopt.problem import load_module_problem

    problem = load_module_problem(source)
    names: list[str] = []
    examples: list[Any] = []
    first = FirstCall()

    def backend(gm: Any, example_inputs: list[Any]) -> Any:
        names[:] = [_source_name(n) for n in gm.graph.find_nodes(op="placeholder")]
        examples[:] = example_inputs
        vector_isa.answer_probes()  # its C++ kernels, if any, ask the CPU probe
        compiled = compile_fx(gm, example_inputs, config_patches=dict(options))
        return first.wrap(compiled)

    with _LOCK:
        strict_fp32()  # the numerics the gates run: autotuning must choose for them
        torch._dynamo.reset()
        try:
            model = problem.make_model(seed, device)
            inputs = problem.make_inputs(seed, device)
            compiled = torch.compile(model, backend=backend, fullgraph=True, dynamic=dynamic)
            with (
                torch.no_grad(),
                shape_config.patch(use_duck_shape=not dynamic, backed_size_oblivious=dynamic),
            ):
                out, sources = run_and_get_code(compiled, *inputs)
        finally:
            torch._dynamo.reset()
        if not sources:
            raise RegenError("Inductor produced no code for the forward")
        first_out, out = out, fields_of(out, problem.module.__name__)
        output = output_form(out)
        leaves = tree_leaves(out)
        layout = output_layout(first, leaves, model)
        if len(layout.picks) != len(leaves):
            raise RegenError("the forward returns a value that no graph output carries")
        inputs_named = forward_names(model)

        def scope(case: list[Any]) -> dict[str, Any]:
            return forward_scope(model, inputs_named, case)

        # where the graph takes a number as a tensor: the compiled call's example inputs
        first_args = argument_reader(names)(scope(inputs))
        wraps = [_number_wrap(a, e) for a, e in zip(first_args, examples, strict=False)]
        # the candidate's own plan, so a candidate that cannot call its wrapper or build its
        # result from it is never offered
        layout_text = (layout.picks, layout.state_outputs, layout.constants)
        plan = ForwardPlan(sources[-1], names, layout_text, wraps, output)
        others, derived = _other_shapes(problem, seed, device, inputs) if dynamic else ([], False)
        for index, case in enumerate([inputs, *others]):
            try:
                with torch.no_grad():
                    args, got = plan.run(scope(case))
            except (AssertionError, RuntimeError) as exc:  # a shape the wrapper refuses
                if index and derived and not _runs_eagerly(problem, seed, device, case):
                    continue  # the gates skip a derived batch the model itself cannot run
                raise RegenError(f"the wrapper cannot run an input set: {exc}") from exc
            if any(kind == "output" and i >= len(got) for kind, i in layout.picks):
                raise RegenError(f"the wrapper returns {len(got)} outputs, fewer than compiled")
            try:
                built = plan.results(got, args)
            except Exception as exc:  # pytree and the picks say why; the candidate would fail
                raise RegenError(f"the forward's result cannot be built: {exc}") from exc
            if index and layout.constants:
                _constants_hold(problem, seed, device, case, built)
    return Regenerated(
        sources[-1],
        names,
        input_signature(inputs),
        output,
        inputs_named,
        model.training,
        [list(p) for p in layout.picks],
        layout.state_outputs,
        wraps,
        result_type(first_out, problem.module.__name__),
        [list(c) for c in layout.constants],
    )


def _constants_hold(problem: Any, seed: int, device: str, case: list[Any], built: Any) -> None:
    """Refuse a wrapper whose kept constants are not the forward's on another input set: a
    size the forward returns (``x.shape``) is a constant of the compiled shapes only."""
    import torch
    from torch.utils._pytree import tree_leaves

    with torch.no_grad():
        eager = problem.make_model(seed, device)(*case)
    eager = tree_leaves(fields_of(eager, problem.module.__name__))
    for got, want in zip(tree_leaves(built), eager, strict=False):
        if not isinstance(want, torch.Tensor) and (type(got) is not type(want) or got != want):
            raise RegenError(f"the forward returns {want!r} here, the wrapper a kept {got!r}")


def _number_wrap(arg: Any, example: Any) -> str | None:
    import torch

    number = isinstance(arg, (int, float)) and not isinstance(arg, bool)
    if number and isinstance(example, torch.Tensor) and example.dim() == 0:
        return f"{str(example.dtype).removeprefix('torch.')}@{example.device}"
    return None


def output_form(out: Any) -> str:
    """How the candidate's forward rebuilds its results from the picked leaves: "tensor",
    "tuple" or "list" of tensors, or a pytree spec (``TREE`` + ``treespec_dumps``) for any
    other nesting of tensors, None, Python numbers and constants (dicts, lists inside
    tuples, a label or a dtype beside a tensor)."""
    import torch
    from torch.utils._pytree import tree_flatten, treespec_dumps

    from kernelopt.compile.output_layout import constant_text

    if isinstance(out, torch.Tensor):
        return "tensor"
    if isinstance(out, (tuple, list)) and all(isinstance(o, torch.Tensor) for o in out):
        return "tuple" if isinstance(out, tuple) else "list"  # a named one: ``result_type``
    leaves, spec = tree_flatten(out)
    kept = (torch.Tensor, int, float)
    strange = [x for x in leaves if not (x is None or isinstance(x, kept) or constant_text(x))]
    if strange:
        kinds = sorted({type(leaf).__name__ for leaf in strange})
        raise RegenError(f"the forward returns {', '.join(kinds)}: not tensors or constants")
    try:
        return TREE + treespec_dumps(spec)
    except (TypeError, NotImplementedError) as exc:  # a container pytree cannot write down
        raise RegenError(f"the forward's output structure cannot be written down: {exc}") from exc


def _nameable(kind: type) -> bool:
    """Whether source can name ``kind`` by its qualified name (not a local class)."""
    return all(part.isidentifier() for part in kind.__qualname__.split("."))


def _own_dataclass(out: Any, problem_module: str) -> bool:
    """Whether ``out`` is an instance of a dataclass the problem file defines by a name."""
    import dataclasses

    kind = type(out)
    return dataclasses.is_dataclass(out) and kind.__module__ == problem_module and _nameable(kind)


def fields_of(out: Any, problem_module: str) -> Any:
    """A forward result that is a dataclass the problem file defines, as the tuple of its
    fields' values (``result_type`` rebuilds it); any other result as it is.

    Dynamo makes such a class a pytree node without a name its specs can be saved under,
    and a process that never compiled the forward does not know it as a node at all.
    """
    import dataclasses

    if not _own_dataclass(out, problem_module):
        return out
    return tuple(getattr(out, f.name) for f in dataclasses.fields(out))


def result_type(out: Any, problem_module: str) -> str | None:
    """Source that rebuilds a named tuple of results in the candidate's module, which holds
    the problem file: ``Name._make`` for a named tuple the file defines, the
    ``torch.return_types`` class for one an operator returns (``torch.max(x, dim)``), a
    builder of a dataclass the file defines from its fields' values (``fields_of``); None
    for a plain tuple or a type the candidate cannot name (it then returns a plain tuple)."""
    kind = type(out)
    if _own_dataclass(out, problem_module):
        return f"_ko_dataclass({kind.__qualname__})"
    if not isinstance(out, tuple) or kind is tuple or not _nameable(kind):
        return None
    if kind.__module__ == problem_module and hasattr(kind, "_make"):
        return f"{kind.__qualname__}._make"
    if kind.__module__ == "torch.return_types":
        return f"_ko_torch.return_types.{kind.__qualname__}"
    return None


def _other_shapes(
    problem: Any, seed: int, device: str, inputs: list[Any]
) -> tuple[list[list[Any]], bool]:
    """The shapes the gates feed besides ``inputs``: the file's held-out sets, or else the
    checker's other batch size (none when no input has a batch dimension); and whether
    they are that derived batch."""
    from kernelopt.loaded_problem import another_batch

    held_out = problem.make_holdout_inputs(seed, device)
    if held_out:
        return held_out, False
    try:
        return [another_batch(inputs, lambda: problem.make_inputs(seed + 1, device))], True
    except ValueError:
        return [], True


def _runs_eagerly(problem: Any, seed: int, device: str, case: list[Any]) -> bool:
    """Whether a fresh copy of the problem's model runs ``case`` (as the gates' reference,
    which drops a derived batch it cannot run, does)."""
    import torch

    try:
        with torch.no_grad():
            problem.make_model(seed, device)(*case)
    except Exception:  # the user's forward, on inputs it may not take: any error says no
        return False
    return True


def forward_names(model: Any) -> list[str]:
    """``forward``'s positional parameter names (Dynamo's ``L[...]`` keys for the inputs).

    The gates pass inputs by position only, so a keyword-only parameter with a default, or
    ``**kwargs``, keeps its default in the compiled code (the candidate's forward, which
    takes positions only, refuses a keyword rather than ignore it); ``*args`` or a
    keyword-only parameter without a default cannot be named.
    """
    import inspect

    params = list(inspect.signature(model.forward).parameters.values())
    if any(p.kind is p.VAR_POSITIONAL for p in params):
        raise RegenError("forward takes *args")
    if any(p.kind is p.KEYWORD_ONLY and p.default is p.empty for p in params):
        raise RegenError("forward takes a keyword-only input without a default")
    return [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]


def generated_code(source: str, seed: int, device: str, options: dict[str, Any]) -> str:
    """The static-shape code a diff produces (normalised), for comparing diffs.

    Building the candidate compiles the same graph again; Inductor's FX-graph cache
    serves that second compile, so only the dynamic-shape one costs a full compile.
    """
    return regenerate(source, seed, device, options).code
