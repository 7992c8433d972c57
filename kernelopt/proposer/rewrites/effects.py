"""What each traced node does besides computing its result, read from the ATen ops it runs.

Dead-code removal must keep a node whose result nothing uses when running it changes
something else: it writes into a tensor that existed before it (an input, a parameter, a
buffer), draws from a random generator (removing it shifts every later draw), or is an op
torch marks side-effectful.  Names cannot tell (``gumbel_softmax`` draws, ``add_.Tensor``
writes); the ATen ops the node dispatches to during the fake-tensor shape pass can: their
schemas say what they write and their tags what they draw.
"""

from __future__ import annotations

import contextlib
from typing import Any

import torch
import torch.fx
from torch.fx.passes.shape_prop import ShapeProp
from torch.multiprocessing.reductions import StorageWeakRef
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

from kernelopt.compile.capture import draws_random

EFFECTS = "kernelopt_effects"  # node.meta key: what the node does besides its result
# the batch-norm schemas do not mark their running statistics as written
_RUNNING_STATS = ("running_mean", "running_var")


def _storage(t: torch.Tensor) -> StorageWeakRef | None:
    try:
        return StorageWeakRef(t.untyped_storage())
    except (RuntimeError, NotImplementedError):  # no storage (sparse, nested)
        return None


class _Recorder(TorchDispatchMode):
    """Notes the effects of the ops one node dispatches to; tensors the node itself made
    may be written freely (a fresh buffer filled in place is still a pure result)."""

    def __init__(self) -> None:
        super().__init__()
        self.made: set[StorageWeakRef] = set()
        self.effects: list[str] = []

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None):
        kwargs = kwargs or {}
        if draws_random(func):
            self.effects.append(f"{func} draws random numbers")
        if func in torch.fx.node._side_effectful_functions:
            self.effects.append(f"{func} is side-effectful")
        for written in self._written(func, args, kwargs):
            if _storage(written) not in self.made:
                self.effects.append(f"{func} writes into a tensor made before it")
                break
        out = func(*args, **kwargs)
        for t in tree_leaves(out):
            if isinstance(t, torch.Tensor) and (ref := _storage(t)) is not None:
                self.made.add(ref)
        return out

    @staticmethod
    def _written(func: Any, args: Any, kwargs: dict[str, Any]) -> list[torch.Tensor]:
        schema = getattr(func, "_schema", None)
        if schema is None:
            return []
        given = dict(zip((a.name for a in schema.arguments), args, strict=False)) | kwargs
        training = given.get("training") is True
        names = [
            a.name
            for a in schema.arguments
            if (a.alias_info is not None and a.alias_info.is_write)
            or (training and a.name in _RUNNING_STATS)
        ]
        return [t for n in names for t in tree_leaves(given.get(n)) if isinstance(t, torch.Tensor)]


class EffectProp(ShapeProp):
    """``ShapeProp`` that also records, per node, what the node does besides its result
    (``node.meta[EFFECTS]``, a list of reasons; empty when it only computes its result)."""

    _recorder: _Recorder | None = None
    running: torch.fx.Node | None = None  # the node a failed propagation stopped at

    def run_node(self, n: torch.fx.Node) -> Any:
        self.running = n
        before = self._versions(n)
        self._recorder = recorder = _Recorder()
        try:
            result = super().run_node(n)
        finally:
            self._recorder = None
        changed = [name for name, (t, v) in before.items() if t._version != v]
        n.meta[EFFECTS] = recorder.effects + [f"{name} changed in place" for name in changed]
        return result

    # The recorder goes inside ShapeProp's fake mode (entered in its run_node), so that it
    # sees the node's own ATen ops, not the fake mode's meta kernels.
    def call_function(self, target: Any, args: Any, kwargs: Any) -> Any:
        with self._recording():
            return super().call_function(target, args, kwargs)

    def call_method(self, target: Any, args: Any, kwargs: Any) -> Any:
        with self._recording():
            return super().call_method(target, args, kwargs)

    def call_module(self, target: Any, args: Any, kwargs: Any) -> Any:
        with self._recording():
            return super().call_module(target, args, kwargs)

    def _recording(self) -> Any:
        return self._recorder if self._recorder is not None else contextlib.nullcontext()

    def _versions(self, n: torch.fx.Node) -> dict[str, tuple[torch.Tensor, int]]:
        """The tensors that exist before ``n`` runs and that it could write, by name."""
        args, kwargs = self.fetch_args_kwargs_from_env(n)
        found = {
            f"argument {i}": t
            for i, t in enumerate(tree_leaves((args, kwargs)))
            if isinstance(t, torch.Tensor)
        }
        module = self.fake_module if self.fake_module is not None else self.module
        if n.op == "call_module":
            sub = module.get_submodule(str(n.target))
            found |= dict(sub.named_parameters()) | dict(sub.named_buffers())
        return {name: (t, t._version) for name, t in found.items()}


def has_effects(node: torch.fx.Node) -> bool:
    """Whether removing ``node`` could change anything besides its own (unused) result;
    a node the effect pass did not run is assumed to."""
    return EFFECTS not in node.meta or bool(node.meta[EFFECTS])
