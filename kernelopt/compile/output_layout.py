"""Which of an Inductor wrapper's outputs are the module's, and which carry its state.

A forward that stores a tensor on its module (``self.avg = ...``, or ``self.calls += 1``,
which stores the same tensor back) makes Dynamo return that tensor from the graph after
the forward's own results, and set the attribute once the graph has run.  A wrapper run on
its own (the gates, the re-stitch) must hand back only the forward's results, and put a
rebound attribute's new value where the next call reads it: the captured argument.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

STATE_PREFIXES = ("param:", "buffer:")


@dataclass
class OutputLayout:
    """``model_outputs``: how many leading wrapper outputs are the forward's results;
    ``state_outputs``: wrapper output index -> the state entry (module name) it rebinds."""

    model_outputs: int
    state_outputs: dict[int, str] = field(default_factory=dict)


def output_layout(
    outputs: Sequence[Any],
    model_leaves: Sequence[Any],
    wrapper_args: Sequence[Any],
    arg_names: Sequence[str],
    model_after: Any,
) -> OutputLayout:
    """The layout of ``outputs``, the wrapper's return on ``wrapper_args``.

    ``model_leaves`` are the compiled forward's flat results on the same state and
    ``model_after`` the module after it ran.  An extra output that is one of the
    arguments was updated in place and needs nothing; any other is matched to the
    parameter or buffer the forward rebound to an equal tensor.
    """
    count = min(len(model_leaves), len(outputs))
    state: dict[int, str] = {}
    for index in range(count, len(outputs)):
        value = outputs[index]
        if any(value is arg for arg in wrapper_args):
            continue
        name = _rebound_entry(value, wrapper_args, arg_names, model_after, set(state.values()))
        if name is not None:
            state[index] = name
    return OutputLayout(model_outputs=count, state_outputs=state)


def _rebound_entry(
    value: Any,
    wrapper_args: Sequence[Any],
    arg_names: Sequence[str],
    model_after: Any,
    taken: set[str],
) -> str | None:
    import torch

    if not isinstance(value, torch.Tensor):
        return None
    for arg, full in zip(wrapper_args, arg_names, strict=False):
        if not full.startswith(STATE_PREFIXES):
            continue
        name = full.split(":", 1)[1]
        now = _module_tensor(model_after, name)
        if name in taken or now is None or now.shape != value.shape or now.dtype != value.dtype:
            continue
        if arg.shape == value.shape and torch.equal(now.detach().to(value.device), value):
            return name
    return None


def _module_tensor(module: Any, name: str) -> Any:
    """The tensor ``module`` holds under the dotted ``name`` now, or None."""
    import torch

    owner = module
    *path, leaf = name.split(".")
    try:
        for part in path:
            owner = getattr(owner, part)
        value = getattr(owner, leaf)
    except AttributeError:
        return None
    return value if isinstance(value, torch.Tensor) else None


def write_back(
    outputs: Sequence[Any], state_outputs: dict[int, str], entries: dict[str, Any]
) -> None:
    """Copy each rebound value into its captured entry, for the next call to read."""
    import torch

    with torch.no_grad():
        for index, name in state_outputs.items():
            target = entries.get(name)
            if target is not None and index < len(outputs):
                target.copy_(outputs[index])
