"""Which of a compiled graph's outputs are the forward's results, and which carry its state.

The forward's results are not simply the graph's outputs.  A forward that stores a tensor
on its module (``self.avg = ...``, or ``self.calls += 1``, which stores the same tensor
back) makes Dynamo return that tensor from the graph and set the attribute once the graph
has run; a tensor returned twice is one graph output; a buffer or input returned as it is
never enters the graph.  The layout is read by identity on the compiled forward's first
call, and replayed wherever a wrapper runs on its own (the gates, the regenerated
candidates): results picked from the outputs or the arguments, state written back.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

STATE_PREFIXES = ("param:", "buffer:")
# ("output", i) / ("input", i): that graph output or argument; ("item", i): graph output i
# as a Python number (a forward's ``.item()``); ("none", 0): a None result; ("constant", i):
# the layout's constant i (a string, a number, a dtype the forward returns as it is)
Pick = tuple[Literal["output", "input", "item", "none", "constant"], int]
# a constant result as text a contract carries: its kind and how to read it back
Constant = tuple[Literal["literal", "float", "dtype", "device"], str]


@dataclass
class OutputLayout:
    """``picks``: where each of the forward's flat results comes from (a graph output or a
    graph input, by position); ``state_outputs``: graph output -> the parameter or buffer
    (module name) the forward stores it in."""

    picks: list[Pick]
    state_outputs: dict[int, str] = field(default_factory=dict)
    constants: list[Constant] = field(default_factory=list)


class FirstCall:
    """Wraps a backend's compiled callable to keep the arguments and outputs of its first
    call (the objects themselves, which the layout is read from by identity)."""

    def __init__(self) -> None:
        self.args: list[Any] | None = None
        self.outputs: list[Any] | None = None

    def wrap(self, compiled: Callable[..., Any]) -> Callable[..., Any]:
        """A plain callable: Dynamo calls a backend's result with the graph's inputs as
        positional arguments (``compile_fx``'s result takes them so, whatever its
        ``_boxed_call`` says); they are kept before the call."""

        def call(*args: Any) -> Any:
            given = list(args)
            out = compiled(*args)
            if self.outputs is None:
                self.args = given
                self.outputs = list(out) if isinstance(out, (tuple, list)) else [out]
            return out

        return call


def _index_of(items: Sequence[Any], value: Any) -> int | None:
    return next((i for i, item in enumerate(items) if item is value), None)


def output_layout(first: FirstCall, leaves: Sequence[Any], module: Any) -> OutputLayout:
    """The layout of the compiled forward whose first call ``first`` kept, given the flat
    results that call returned (``leaves``) and the ``module`` after it.

    A Python constant the forward returns (a string, a number no output holds, a dtype) is
    kept as such: the graph never returns it.  A result found nowhere else makes the
    layout positional: every output that carries no state, in order, as the wrapper's
    runner returned before layouts were kept.
    """
    outputs, args = first.outputs or [], first.args or []
    state = {
        index: name
        for name, tensor in state_tensors(module).items()
        if (index := _index_of(outputs, tensor)) is not None
    }
    picks: list[Pick] = []
    constants: list[Constant] = []
    for leaf in leaves:
        if leaf is None:
            picks.append(("none", 0))
        elif (index := _index_of(outputs, leaf)) is not None:
            picks.append(("output", index))
        elif (index := _index_of(args, leaf)) is not None:
            picks.append(("input", index))
        elif (index := _scalar_source(outputs, leaf)) is not None:
            picks.append(("item", index))
        elif (constant := constant_text(leaf)) is not None:
            picks.append(("constant", len(constants)))
            constants.append(constant)
        else:
            picks, constants = [("output", i) for i in range(len(outputs)) if i not in state], []
            break
    return OutputLayout(picks=picks, state_outputs=state, constants=constants)


def constant_text(value: Any) -> Constant | None:
    """``value`` as a ``Constant``, for the Python values a forward may return as they are;
    None for anything else."""
    import torch

    if isinstance(value, torch.dtype):
        return ("dtype", str(value).removeprefix("torch."))
    if isinstance(value, torch.device):
        return ("device", str(value))
    if isinstance(value, float):
        return ("float", repr(value))  # float() reads nan and inf back, literal_eval does not
    if isinstance(value, (str, int, bool, complex)):
        return ("literal", repr(value))
    return None


def constant_value(constant: Sequence[str]) -> Any:
    """The value a ``Constant`` stands for."""
    import torch

    kind, text = constant
    if kind == "float":
        return float(text)
    if kind == "dtype":
        return getattr(torch, text)
    if kind == "device":
        return torch.device(text)
    return ast.literal_eval(text)


def _scalar_source(outputs: Sequence[Any], leaf: Any) -> int | None:
    """The one-element output a Python number result was read from, if exactly one matches."""
    import torch

    if not isinstance(leaf, (int, float)) or isinstance(leaf, bool):
        return None
    found = [
        i
        for i, out in enumerate(outputs)
        if isinstance(out, torch.Tensor) and out.numel() == 1 and out.item() == leaf
    ]
    return found[0] if len(found) == 1 else None


def state_tensors(module: Any) -> dict[str, Any]:
    """``module``'s parameters and buffers by name (shared ones under each name)."""
    out: dict[str, Any] = {}
    for name, p in module.named_parameters(remove_duplicate=False):
        out[name] = p
    for name, b in module.named_buffers(remove_duplicate=False):
        if b is not None:
            out[name] = b
    return out


class StateSnapshot:
    """Chosen state entries of a module as they are now, put back by ``restore``: values
    copied in unconditionally (batch norm updates its running statistics inside the kernel
    without bumping their version counters), and a name rebound since to a new tensor
    (``self.count = self.count + 1``) gets its original object back."""

    def __init__(self, module: Any, keep: Sequence[str]) -> None:
        self.module = module
        tensors = state_tensors(module)
        self.originals = {n: tensors[n] for n in keep if n in tensors}
        self.saved = {n: t.detach().clone() for n, t in self.originals.items()}

    def restore(self) -> None:
        if not self.originals:
            return
        import torch

        current = state_tensors(self.module)
        with torch.no_grad():
            for name, original in self.originals.items():
                if current.get(name) is not original:
                    prefix, _, leaf = name.rpartition(".")
                    owner = self.module.get_submodule(prefix) if prefix else self.module
                    table = owner._parameters if leaf in owner._parameters else owner._buffers
                    table[leaf] = original
                original.copy_(self.saved[name])


def picked(
    outputs: Sequence[Any],
    args: Sequence[Any],
    picks: Sequence[Pick] | None,
    constants: Sequence[Any] = (),
) -> tuple:
    """The forward's results from one wrapper call (``picks`` None: every output);
    ``constants``: the layout's constants as values (``constant_value``)."""
    if picks is None:
        return tuple(outputs)
    return tuple(_pick(outputs, args, constants, kind, i) for kind, i in picks)


def _pick(
    outputs: Sequence[Any], args: Sequence[Any], constants: Sequence[Any], kind: str, index: int
) -> Any:
    if kind == "output":
        return outputs[index]
    if kind == "input":
        return args[index]
    if kind == "item":
        return outputs[index].item()
    if kind == "constant":
        return constants[index]
    return None


def write_back(
    outputs: Sequence[Any], state_outputs: dict[int, str], entries: dict[str, Any]
) -> None:
    """Copy each stored value into its captured entry, for the next call to read."""
    import torch

    with torch.no_grad():
        for index, name in state_outputs.items():
            target = entries.get(name)
            if target is not None and index < len(outputs) and outputs[index] is not target:
                target.copy_(outputs[index])
