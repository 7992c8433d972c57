"""Load KernelBench-style files and build what a gate child runs.

A minimal loader of the gates' own: the checker must not depend on code it is
checking, and ``kernelopt verify`` must work with nothing else of the project
installed.  Semantics follow KernelBench: ``Model(*get_init_inputs())`` is the
reference, ``get_inputs()`` draws one call's inputs; both sides are built under
the same ``torch.manual_seed`` so freshly initialised weights agree, and a
``ModelNew`` with Model's parameter names gets Model's state dict outright.
Standalone Triton / Helion kernel files load through the same loader
(``kernelopt.kinds`` presents them as a parameterless ``Model`` wrapping
their reference) and bring their own baseline.
"""

from __future__ import annotations

import hashlib
import importlib.util
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import torch

from kernelopt.errors import ProblemError


def load_module(path: str | Path, prefix: str) -> ModuleType:
    """Import a file as a fresh module under a unique name (Triton needs a real file)."""
    path = Path(path).resolve()
    if not path.is_file():
        raise ProblemError(str(path), "file not found")
    digest = hashlib.sha256(str(path).encode()).hexdigest()[:10]
    name = f"_kernelopt_{prefix}_{path.stem}_{digest}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ProblemError(str(path), "not importable as a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


class ProblemFile:
    """A KernelBench problem module: ``Model``, ``get_inputs``, ``get_init_inputs``.

    Imported and validated by the project's loader (``kernelopt.problem``),
    whose seeding rules the compile step used to capture weights; models are
    left in the mode their constructor gives them, as KernelBench runs them,
    unless the evaluation policy says otherwise (``gates.call_policy``).
    """

    def __init__(self, path: str | Path) -> None:
        from kernelopt.problem import load_problem

        self.path = str(path)
        loaded = load_problem(Path(path))
        self.module = loaded.module
        self.Model = loaded.model_class
        self.get_inputs: Callable[[], Any] = loaded.get_inputs
        self.get_init_inputs: Callable[[], Any] = loaded.get_init_inputs
        self.get_holdout_inputs: Callable[[], Any] | None = loaded.get_holdout_inputs
        # a standalone Triton / Helion problem (kernelopt.kinds): Model is its reference,
        # the baseline is the file's own kernel (``baseline``), never torch.compile(Model)
        self.kernel: Any = loaded.kernel
        self.mode: str | None = loaded.mode  # the file's KERNELOPT_MODE (gates.call_policy)

    def init_inputs(self, seed: int) -> list[Any]:
        torch.manual_seed(seed)
        return list(self.get_init_inputs())

    def build(self, cls: type, seed: int, device: str) -> torch.nn.Module:
        """Construct ``cls(*init_inputs)`` under ``seed`` (Model and ModelNew alike)."""
        if self.kernel is not None and cls is self.Model:
            from kernelopt.kinds.validate import check_runtime

            check_runtime(self.kernel, device, seed)  # fits in memory, reference deterministic
        init = self.init_inputs(seed)
        torch.manual_seed(seed)
        model = cls(*init)
        return model.to(device)

    def baseline(self, seed: int, device: str) -> torch.nn.Module | None:
        """A kernel problem's baseline (its own launcher, Helion autotuned); None for modules."""
        if self.kernel is None:
            return None
        from kernelopt.kinds.baseline import baseline_model

        return baseline_model(self.kernel, device, seed)

    def inputs(self, seed: int) -> list[Any]:
        torch.manual_seed(seed)
        return list(self.get_inputs())

    def holdout_inputs(self, seed: int) -> list[list[Any]]:
        """Held-out input lists (another batch size); [] when the problem defines none."""
        if self.get_holdout_inputs is None:
            return []
        torch.manual_seed(seed)
        value = self.get_holdout_inputs()
        if not isinstance(value, list | tuple) or not value:
            raise ProblemError(self.path, "get_holdout_inputs() must return a list")
        if all(isinstance(v, list | tuple) for v in value):
            return [list(v) for v in value]
        return [list(value)]


def load_candidate_class(path: str | Path) -> type:
    module = load_module(path, "candidate")
    cls = getattr(module, "ModelNew", None)
    if cls is None:
        raise AttributeError(
            f"{Path(path).name} defines no class ModelNew (a whole-model candidate defines "
            "ModelNew; a kernel candidate defines launch())"
        )
    return cls


def to_device(values: list[Any], device: str) -> list[Any]:
    return [v.to(device) if isinstance(v, torch.Tensor) else v for v in values]


def to_cpu(values: list[Any]) -> list[Any]:
    return [v.detach().to("cpu") if isinstance(v, torch.Tensor) else v for v in values]


def to_double(values: list[Any]) -> list[Any]:
    return [
        v.double() if isinstance(v, torch.Tensor) and v.is_floating_point() else v for v in values
    ]


def flatten_output(out: Any) -> list[Any]:
    """Output leaves in a stable order (tensor, tuple/list/dict of tensors, scalars)."""
    from torch.utils._pytree import tree_flatten

    leaves, _ = tree_flatten(out)
    return list(leaves)


def shape_of(value: Any) -> list[int] | None:
    return list(value.shape) if isinstance(value, torch.Tensor) else None


def dtype_of(value: Any) -> str | None:
    return str(value.dtype).removeprefix("torch.") if isinstance(value, torch.Tensor) else None


def nbytes(values: list[Any]) -> int:
    return sum(v.numel() * v.element_size() for v in values if isinstance(v, torch.Tensor))


def same_values(a: Any, b: Any) -> bool:
    """Bitwise equality that treats NaN == NaN (inputs may legitimately hold NaN)."""
    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
        if a.shape != b.shape or a.dtype != b.dtype:
            return False
        a = a.detach().cpu()
        b = b.detach().cpu()
        if a.is_floating_point():
            return bool(((a == b) | (torch.isnan(a) & torch.isnan(b))).all())
        return bool(torch.equal(a, b))
    return bool(a == b)


def set_path(directory: str, name: str) -> Path:
    return Path(directory) / f"{name}.pt"


def save_values(path: Path, values: list[Any]) -> None:
    torch.save(to_cpu(values), path)


def load_values(path: Path) -> list[Any]:
    """Tensors and plain containers only: these files pass through candidate processes.

    A candidate can write (or overwrite) any file its process can reach; with
    full unpickling, a crafted ``.pt`` would run code in the checker or in the
    baseline's timing process.
    """
    return list(torch.load(path, weights_only=True))


def digest_dir(directory: Path) -> dict[str, str]:
    """sha256 of every ``.pt`` file in ``directory``, by file name."""
    out = {}
    for path in sorted(Path(directory).glob("*.pt")):
        out[path.name] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out
