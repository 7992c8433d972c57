"""Load KernelBench-style files and build what a gate child runs.

Problems load through the project's one loader (``kernelopt.kinds.registry``),
the only code of the project the checker imports besides plain helpers: the
compile step loaded the problem the same way, so both agree on Model, inputs
and seeds.  Semantics follow KernelBench: ``Model(*get_init_inputs())`` is the
reference, ``get_inputs()`` draws one call's inputs; both sides are built under
the same seed (``kernelopt.loaded_problem.seeded``) so freshly initialised
weights agree, and a ``ModelNew`` with Model's parameter names gets Model's
state dict outright.  Standalone Triton / Helion kernel files load through the
same loader (presented as a parameterless ``Model`` wrapping their reference)
and bring their own baseline.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import ModuleType
from typing import Any

import torch

from kernelopt.errors import ProblemError
from kernelopt.kinds.registry import load_problem
from kernelopt.loaded_problem import LoadedProblem, seeded
from kernelopt.pyfile import NoImportSpec, exec_file
from kernelopt.store import file_digest


def load_module(path: str | Path, prefix: str) -> ModuleType:
    """Import a file as a fresh module under a unique name (Triton needs a real file)."""
    path = Path(path).resolve()
    if not path.is_file():
        raise ProblemError(str(path), "file not found")
    digest = hashlib.sha256(str(path).encode()).hexdigest()[:10]
    try:
        return exec_file(path, f"_kernelopt_{prefix}_{path.stem}_{digest}")
    except NoImportSpec as exc:
        raise ProblemError(str(path), "not importable as a Python module") from exc


class ProblemFile:
    """A problem of any kind, as a gate child uses it: ``Model``, inputs, held-out inputs.

    Imported and validated by the one loader (``kernelopt.kinds.registry``), whose
    seeding rule (``kernelopt.loaded_problem.seeded``) the compile step used too;
    models are left in the mode their constructor gives them, as KernelBench runs
    them, unless the evaluation policy says otherwise (``gates.call_policy``).  A
    kernel problem's Model is its reference and its baseline the file's own
    kernel; the loaded problem's kind answers for both.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = str(path)
        self.loaded: LoadedProblem = load_problem(Path(path))
        self.module = self.loaded.module
        self.Model = self.loaded.model_class
        self.get_inputs: Callable[[], Any] = self.loaded.get_inputs
        self.get_init_inputs: Callable[[], Any] = self.loaded.get_init_inputs
        self.get_holdout_inputs: Callable[[], Any] | None = self.loaded.get_holdout_inputs
        self.mode: str | None = self.loaded.mode  # the file's KERNELOPT_MODE (gates.call_policy)

    @property
    def own_baseline(self) -> bool:
        """True when the file brings its baseline (a kernel problem), else torch.compile's."""
        return self.loaded.own_baseline

    def init_inputs(self, seed: int) -> list[Any]:
        return self.loaded.make_init_inputs(seed)

    def build(self, cls: type, seed: int, device: str) -> torch.nn.Module:
        """Construct ``cls(*init_inputs)`` under ``seed`` (Model and ModelNew alike)."""
        if cls is self.Model:
            self.loaded.check_runtime(device, seed)  # a kernel: fits in memory, deterministic
        return self.loaded.build(cls, seed).to(device)

    def baseline(self, seed: int, device: str) -> torch.nn.Module | None:
        """A kernel problem's baseline (its own launcher, Helion autotuned); None for modules."""
        return self.loaded.baseline_model(device, seed)

    def inputs(self, seed: int) -> list[Any]:
        return list(seeded(seed, self.get_inputs))

    def holdout_inputs(self, seed: int) -> list[list[Any]]:
        """Held-out input lists (another batch size); [] when the problem defines none."""
        if self.get_holdout_inputs is None:
            return []
        value = seeded(seed, self.get_holdout_inputs)
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
    """Output leaves in a stable order (tensor, tuple/list/dict of tensors, scalars): the
    order Dynamo's graph returns them in, so a compiled wrapper's flat outputs line up."""
    from torch.utils._pytree import tree_flatten

    leaves, _ = tree_flatten(out)
    return list(leaves)


def output_structure(out: Any) -> str:
    """The containers of an output and their dict keys, leaves as ``*``: ``{'a':*,'b':(*,*)}``.

    Leaves are compared in ``flatten_output``'s order, which loses the keys; this keeps
    them, in that order, so an output with its dict values under each other's keys is told
    apart.  Lists, tuples and named tuples all read ``(...)``: callers index and unpack
    them alike.
    """
    if isinstance(out, dict):
        return "{" + ",".join(f"{k!r}:{output_structure(v)}" for k, v in out.items()) + "}"
    if isinstance(out, (list, tuple)):
        return "(" + ",".join(output_structure(v) for v in out) + ")"
    return "None" if out is None else "*"


def shape_of(value: Any) -> list[int] | None:
    return list(value.shape) if isinstance(value, torch.Tensor) else None


def dtype_of(value: Any) -> str | None:
    return str(value.dtype).removeprefix("torch.") if isinstance(value, torch.Tensor) else None


def nbytes(values: list[Any]) -> int:
    return sum(v.numel() * v.element_size() for v in values if isinstance(v, torch.Tensor))


def inputs_after(set_name: str) -> str:
    """The file name (``set_path``'s) of a candidate's inputs after a call on ``set_name``:
    those the reference changes in place."""
    return f"{set_name}.inputs_after"


def state_after(set_name: str) -> str:
    """The file name (``set_path``'s) of the module state after a call on ``set_name``: the
    entries the reference's forward changes (``EvaluationPolicy.stateful``), in that order;
    the reference's lies in its refs, the candidate's in its outputs."""
    return f"{set_name}.state_after"


def inputs_post(set_name: str) -> str:
    """The file name of the inputs after the reference's call on ``set_name`` (kept only
    when the call changes some in place)."""
    return f"{set_name}.post"


def tied(set_name: str) -> str:
    """The file name of the near-ties of the index outputs on ``set_name``
    (``gates.index_ties``; kept only where some index has them)."""
    return f"{set_name}.ties"


def in_float64(file_name: str) -> str:
    """The float64 run's counterpart of a reference file (outputs, inputs after the call,
    state after it), which gate 2's float64 excuse compares with."""
    return f"{file_name}.fp64"


def set_path(directory: str, name: str) -> Path:
    return Path(directory) / f"{name}.pt"


def save_values(path: Path, values: list[Any]) -> None:
    """Written without the zip records' CRC32: a reference writes several GBs of these
    for a large-input problem, the checksum is one more pass over every byte, and
    ``torch.load`` does not need it (where files must be what was written, their sha256
    is checked: ``gates.reference_cache``)."""
    with _without_crc32():
        torch.save(to_cpu(values), path)


@contextlib.contextmanager
def _without_crc32() -> Iterator[None]:
    kept = torch.serialization.get_crc32_options()
    torch.serialization.set_crc32_options(False)
    try:
        yield
    finally:
        torch.serialization.set_crc32_options(kept)


def load_values(path: Path, *, mmap: bool = False) -> list[Any]:
    """Tensors and plain containers only: these files pass through candidate processes.

    A candidate can write (or overwrite) any file its process can reach; with
    full unpickling, a crafted ``.pt`` would run code in the checker or in the
    baseline's timing process.  ``mmap``: tensors backed by a private mapping of
    the file instead of a copy, for values only read: a later write to the file
    would show through, so only for a child's check of what it just wrote, or for
    files unlinked right after (``gates.reference.prepare_reference``).
    """
    return list(torch.load(path, weights_only=True, mmap=mmap))


def digest_files(paths: list[Path]) -> list[str]:
    """sha256 of each file, several files at once: hashlib and file reads release the GIL,
    so a host's idle cores hash a bundle's GBs side by side (the same digests)."""
    workers = min(len(paths), _HASH_THREADS, os.cpu_count() or 1)
    if workers <= 1:
        return [file_digest(path) for path in paths]
    with ThreadPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(file_digest, paths))


_HASH_THREADS = 8


def digest_dir(directory: Path) -> dict[str, str]:
    """sha256 of every ``.pt`` file in ``directory``, by file name."""
    paths = sorted(Path(directory).glob("*.pt"))
    return {path.name: digest for path, digest in zip(paths, digest_files(paths), strict=True)}
