"""What a loaded problem is, for every kind: ``LoadedProblem`` and the ``KernelProblem`` it wraps.

The module-problem loader (``kernelopt.problem``), the kernel-problem loader
(``kernelopt.kinds.problem``) and the kernel runtime checks
(``kernelopt.kinds.validate``) all build or read these shapes; keeping them in
one module below all three is what lets those modules import each other in one
direction only.  Imports no torch (methods import it when called).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

from kernelopt.contracts.problem import ProblemKind

# Train or eval mode (issue 30).  The convention is KernelBench's: the model as its
# constructor leaves it (training mode unless it calls .eval()).  A file overrides it with
# a module-level ``KERNELOPT_MODE = "eval"`` (or "train"); GateSettings.model_mode
# overrides both for a verification ("auto" = the file's, else the convention).
MODE_ATTR = "KERNELOPT_MODE"
MODES = ("as_constructed", "train", "eval")
CONVENTION = "KernelBench convention: the model as constructed"


def resolve_mode(setting: str, file_mode: str | None) -> tuple[str, str]:
    """``(mode, why)``: the mode every side is evaluated in, and where it comes from."""
    if setting != "auto":
        if setting not in MODES:
            raise ValueError(f"model_mode must be auto or one of {MODES}, got {setting!r}")
        return setting, f"setting model_mode={setting}"
    if file_mode is not None:
        return file_mode, f"the file's {MODE_ATTR} = {file_mode!r}"
    return "as_constructed", CONVENTION


def apply_mode(model: Any, mode: str) -> Any:
    """``train()`` or ``eval()`` as ``mode`` says; ``as_constructed`` leaves the model be."""
    if mode in ("train", "eval"):
        model.train(mode == "train")
    return model


@dataclass(frozen=True)
class LoadedProblem:
    """An imported, validated problem module."""

    name: str
    path: str
    source: str
    module: ModuleType
    model_class: type
    get_inputs: Callable[[], Sequence[Any]]
    get_init_inputs: Callable[[], Sequence[Any]]
    get_holdout_inputs: Callable[[], Sequence[Sequence[Any]]] | None = None
    # a standalone Triton / Helion problem adapted by kernelopt.kinds: its kind and its
    # KernelProblem (Model is then the reference; the baseline is the file's own kernel)
    kind: str = "module"
    kernel: Any = None
    mode: str | None = None  # the file's KERNELOPT_MODE, when it sets one

    @property
    def resolved_mode(self) -> str:
        return resolve_mode("auto", self.mode)[0]

    @property
    def source_sha256(self) -> str:
        return hashlib.sha256(self.source.encode("utf-8")).hexdigest()

    def make_init_inputs(self, seed: int) -> list[Any]:
        import torch

        torch.manual_seed(seed)
        return list(self.get_init_inputs())

    def make_model(self, seed: int, device: str = "cuda", dtype: Any = None) -> Any:
        """``Model(*get_init_inputs())`` with weights drawn from ``seed`` (on the CPU, then moved).

        The model is left in the mode its constructor gives it (training mode,
        as KernelBench evaluates it): batch-norm then normalises with batch
        statistics, which is what the reference computation means.  A file's
        ``KERNELOPT_MODE`` overrides that, as it does in the gates.
        """
        import torch

        init = self.make_init_inputs(seed)
        torch.manual_seed(seed)
        model = apply_mode(self.model_class(*init), self.resolved_mode)
        if dtype is not None:
            model = model.to(dtype=dtype)
        return model.to(device)

    def make_inputs(self, seed: int, device: str = "cuda", dtype: Any = None) -> list[Any]:
        """``get_inputs()`` drawn from ``seed`` (CPU RNG, so identical on every machine)."""
        import torch

        torch.manual_seed(seed)
        return [_to(x, device, dtype) for x in self.get_inputs()]

    def make_holdout_inputs(
        self, seed: int, device: str = "cuda", dtype: Any = None
    ) -> list[list[Any]]:
        """Held-out input sets (empty when the problem defines none)."""
        import torch

        if self.get_holdout_inputs is None:
            return []
        torch.manual_seed(seed)
        return [[_to(x, device, dtype) for x in case] for case in self.get_holdout_inputs()]


def _to(value: Any, device: str, dtype: Any) -> Any:
    import torch

    if isinstance(value, torch.Tensor):
        if dtype is not None and value.is_floating_point():
            value = value.to(dtype=dtype)
        return value.to(device)
    return value


@dataclass(frozen=True)
class KernelProblem:
    """An imported, structurally valid kernel problem (see the README for the file format)."""

    kind: ProblemKind
    name: str
    path: str  # the user's file, or a label for source text
    source: str
    module: ModuleType
    reference: Callable[..., Any]
    get_inputs: Callable[[], Sequence[Any]]
    get_holdout_inputs: Callable[[], Sequence[Sequence[Any]]] | None
    kernels: tuple[str, ...]  # the @triton.jit / @helion.kernel functions, in file order
    entry: str  # what ModelNew.forward calls: "launch", or the one Helion kernel
    tunables: dict[str, int] = field(default_factory=dict)  # launch's keyword-only ints
    tune_space: dict[str, list[int]] = field(default_factory=dict)  # optional TUNE
    autotune_effort: str | None = None  # Helion: the file's AUTOTUNE_EFFORT, if any

    @property
    def source_sha256(self) -> str:
        return hashlib.sha256(self.source.encode("utf-8")).hexdigest()

    @property
    def launch(self) -> Callable[..., Any]:
        """The baseline launcher as the file declares it (unpinned)."""
        return getattr(self.module, self.entry)

    def inputs(self, seed: int, device: str = "cpu") -> list[Any]:
        """``get_inputs()`` drawn from ``seed`` on the CPU RNG, then moved to ``device``."""
        import torch

        torch.manual_seed(seed)
        return [_kernel_input_to(x, device) for x in self.get_inputs()]

    def holdout_inputs(self, seed: int, device: str = "cpu") -> list[list[Any]]:
        import torch

        if self.get_holdout_inputs is None:
            return []
        torch.manual_seed(seed)
        return [[_kernel_input_to(x, device) for x in case] for case in self.get_holdout_inputs()]

    def reference_model_class(self) -> type:
        """``Model``: the reference as a parameterless module (one class per problem)."""
        import torch

        reference = self.reference

        class ReferenceModel(torch.nn.Module):
            """``reference(*inputs)`` as a KernelBench Model: the eager role."""

            def forward(self, *inputs: Any) -> Any:
                return reference(*inputs)

        ReferenceModel.__qualname__ = ReferenceModel.__name__ = f"ReferenceModel_{self.name}"
        return ReferenceModel

    def as_loaded(self) -> LoadedProblem:
        """This problem as a ``LoadedProblem`` (Model = reference)."""
        return LoadedProblem(
            name=self.name,
            path=self.path,
            source=self.source,
            module=self.module,
            model_class=self.reference_model_class(),
            get_inputs=self.get_inputs,
            get_init_inputs=_no_init_inputs,
            get_holdout_inputs=self.get_holdout_inputs,
            kind=self.kind.value,
            kernel=self,
        )


def _no_init_inputs() -> list[Any]:
    return []


def _kernel_input_to(value: Any, device: str) -> Any:
    import torch

    return value.to(device) if isinstance(value, torch.Tensor) else value


__all__ = [
    "CONVENTION",
    "MODES",
    "MODE_ATTR",
    "KernelProblem",
    "LoadedProblem",
    "apply_mode",
    "resolve_mode",
]
