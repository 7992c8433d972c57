"""What a regenerated candidate's ``forward`` runs on every call.

On a small forward the perf gate times host microseconds, so everything a call would
otherwise recompute (the argument expressions, the result's pytree spec, the shape check
that picks the static wrapper) is built once per wrapper here.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from operator import itemgetter
from typing import Any

TREE = "tree:"  # an output form that is a pytree spec, not "tensor", "tuple" or "list"

Results = Callable[[Sequence[Any], Sequence[Any]], Any]


def dataclass_builder(kind: type) -> Callable[[Sequence[Any]], Any]:
    """``values -> kind(...)``: a dataclass from its fields' values in field order (those
    ``__init__`` does not take are set afterwards, as a frozen class allows)."""
    import dataclasses

    fields = dataclasses.fields(kind)

    def build(values: Sequence[Any]) -> Any:
        pairs = list(zip(fields, values, strict=True))
        made = kind(**{f.name: v for f, v in pairs if f.init})
        for f, v in pairs:
            if not f.init:
                object.__setattr__(made, f.name, v)
        return made

    return build


def wrapped_args(args: list[Any], wraps: Sequence[str | None]) -> list[Any]:
    """``args`` with each Python number the graph takes as a 0-d tensor made one, as
    Dynamo hands it over (a new list: the wrapper's ``call`` empties the one it gets)."""
    import torch

    out = list(args)
    for i, wrap in enumerate(wraps):
        if wrap is not None:
            dtype, _, device = wrap.partition("@")
            out[i] = torch.tensor(out[i], dtype=getattr(torch, dtype), device=device)
    return out


def result_builder(
    picks: Sequence[Sequence[Any]], form: str, constants: Sequence[Sequence[str]] = ()
) -> Results:
    """``(outputs, args) -> result``: the forward's result from one wrapper call, its
    leaves by ``picks`` (``output_layout.picked``; ``constants`` as ``Constant`` texts),
    built in ``form`` (``output_form``)."""
    from torch.utils._pytree import tree_unflatten, treespec_loads

    from kernelopt.compile.output_layout import constant_value

    values = [constant_value(c) for c in constants]
    leaves = _leaf_picker([(str(kind), int(i)) for kind, i in picks], values)
    if form == "tensor":
        return lambda outputs, args: leaves(outputs, args)[0]
    if form.startswith(TREE):
        spec = treespec_loads(form[len(TREE) :])
        return lambda outputs, args: tree_unflatten(list(leaves(outputs, args)), spec)
    if form == "tuple":
        return leaves
    return lambda outputs, args: list(leaves(outputs, args))


def _leaf_picker(picks: list[tuple[str, int]], constants: Sequence[Any]) -> Results:
    from kernelopt.compile.output_layout import picked

    if picks and all(kind == "output" for kind, _ in picks):  # the common case, by index
        get = itemgetter(*(i for _, i in picks))
        if len(picks) == 1:
            return lambda outputs, args: (get(outputs),)
        return lambda outputs, args: get(outputs)
    return lambda outputs, args: picked(outputs, args, picks, constants)


def forward_results(outputs: Sequence[Any], args: Sequence[Any], picks: Any, form: str) -> Any:
    """The forward's result from one wrapper call, built as the forward returned it."""
    return result_builder(picks, form)(outputs, args)


class ShapeCheck:
    """Whether a call's inputs are those the static wrapper was compiled for (each
    tensor's shape, stride, dtype and device type, as ``code.input_signature`` lists them)."""

    def __init__(self, signature: Sequence[Any]) -> None:
        import torch

        self.tensor = torch.Tensor
        self.expect = [
            None
            if entry is None
            else (
                tuple(entry[0]),
                tuple(entry[1]),
                getattr(torch, str(entry[2]).removeprefix("torch.")),
                entry[3],
            )
            for entry in signature
        ]

    def __call__(self, values: Sequence[Any]) -> bool:
        if len(values) != len(self.expect):
            return False
        for value, want in zip(values, self.expect, strict=True):
            tensor = isinstance(value, self.tensor)
            if want is None:
                if tensor:
                    return False
            elif not (
                tensor
                and value.shape == want[0]
                and value.stride() == want[1]
                and value.dtype == want[2]
                and value.device.type == want[3]
            ):
                return False
        return True


def forward_scope(module: Any, names: Sequence[str], inputs: Sequence[Any]) -> dict[str, Any]:
    """``L``, the locals Dynamo's source expressions read: ``self`` and ``forward``'s inputs
    by name, and the names of the wrapper Dynamo traces when ``forward`` is torch's own
    (an ``nn.Sequential`` subclass that writes none: ``L['fn']``, ``L['args'][0]``)."""
    scope: dict[str, Any] = {"fn": module, "args": tuple(inputs), "kwargs": {}}
    scope["self"] = module
    scope.update(zip(names, inputs, strict=False))
    return scope


def argument_reader(args: Sequence[str]) -> Callable[[dict[str, Any]], list[Any]]:
    """``L -> [graph arguments]``: Dynamo's source expressions over ``forward``'s locals
    (``L['x']``, ``L['self'].w``), compiled into one expression that reads nothing but ``L``."""
    return eval(compile(f"lambda L: [{', '.join(args)}]", "<graph inputs>", "eval"), {})


class ForwardPlan:
    """One regenerated wrapper as ``forward`` calls it: ``run(L)`` hands the wrapper the
    graph's arguments (Dynamo's source expressions over ``forward``'s locals ``L``) and
    returns them with the wrapper's outputs; ``results`` builds the forward's result and
    ``state`` names the outputs the forward stores on its module."""

    def __init__(
        self,
        wrapper: str,
        args: Sequence[str],
        layout: Sequence[Any],
        wraps: Sequence[str | None],
        form: str,
    ) -> None:
        from kernelopt.compile.runtime import load_wrapper_module

        self.call = load_wrapper_module(wrapper, "regen").call
        self.fetch = argument_reader(args)
        picks, state, *constants = layout  # candidates made before constants have two
        self.results = result_builder(picks, form, constants[0] if constants else ())
        self.state = {int(index): name for index, name in dict(state).items()}
        self.wraps = list(wraps) if any(w is not None for w in wraps) else None

    def run(self, scope: dict[str, Any]) -> tuple[list[Any], Any]:
        args = self.fetch(scope)
        outputs = self.call(wrapped_args(args, self.wraps) if self.wraps else list(args))
        return args, outputs
