"""What a loaded problem is, for every kind: ``LoadedProblem`` and the ``KernelProblem`` it wraps.

The module-problem loader (``kernelopt.problem``), the kernel-problem loader
(``kernelopt.kinds.problem``) and the kernel runtime checks
(``kernelopt.kinds.validate``) all build or read these shapes; keeping them in
one module below all three is what lets those modules import each other in one
direction only.  The seeding rule (``seeded``) lives here too, once, so the
compile step, the gates and every kind draw the same tensors from a seed.
Imports no torch (functions import it when called).
"""

from __future__ import annotations

import hashlib
import random
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any, Protocol, TypeVar

from kernelopt.contracts.problem import ProblemKind
from kernelopt.errors import ProblemError

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


T = TypeVar("T")


def seeded(seed: int, generate: Callable[[], T]) -> T:
    """``generate()`` right after seeding torch, Python's ``random`` and NumPy (if imported)
    with ``seed``: the one seeding rule.

    Generators draw on the CPU RNG, so a seed gives the same tensors on every
    machine; both sides of a comparison (Model and ModelNew, baseline and
    candidate) are built through this, so freshly initialised weights agree.  A
    ``get_inputs()`` that draws a size or a scale with ``random`` or NumPy gets the
    same one for a seed wherever it runs.
    """
    import torch

    torch.manual_seed(seed)
    seed_python(seed)
    return generate()


def seed_python(seed: int) -> None:
    """Seed Python's ``random`` and NumPy's global generator (if NumPy was imported): the
    part of seeding that is not torch's, shared with the gates' per-call seeding."""
    random.seed(seed)
    numpy = sys.modules.get("numpy")
    if numpy is not None:
        numpy.random.seed(seed % 2**32)


def input_signature(value: Any) -> str:
    """What a compiled forward is specialised to in one input: a tensor's shape and dtype, a
    plain value itself, anything else its type (whose repr may carry an address)."""
    shape, dtype = getattr(value, "shape", None), getattr(value, "dtype", None)
    if shape is not None and dtype is not None:
        return f"a tensor of shape {tuple(shape)} ({str(dtype).removeprefix('torch.')})"
    if value is None or isinstance(value, (bool, int, float, complex, str)):
        return repr(value)[:80]
    return f"a {type(value).__name__}"


def seed_dependent_inputs(make: Callable[[int], Sequence[Any]], seed: int = 0) -> str:
    """Why ``make(s)`` (a problem's inputs) cannot feed the one forward compiled from
    ``seed``'s: an input whose shape, dtype or non-tensor value changes under the gates'
    seeds.  Empty when none does."""
    from kernelopt.contracts.verdicts import GateSettings

    seeds = [seed, *(s for s in GateSettings().seeds if s != seed)]
    first = [input_signature(x) for x in make(seeds[0])]
    for later in seeds[1:]:
        other = [input_signature(x) for x in make(later)]
        if len(other) != len(first):
            return (
                f"get_inputs() gives {len(first)} inputs under seed {seeds[0]} and "
                f"{len(other)} under seed {later}" + _SAME_FOR_EVERY_SEED
            )
        for i, (a, b) in enumerate(zip(first, other, strict=True)):
            if a != b:
                return (
                    f"get_inputs() gives other inputs under other seeds: input {i} is {a} "
                    f"under seed {seeds[0]} and {b} under seed {later}" + _SAME_FOR_EVERY_SEED
                )
    return ""


_SAME_FOR_EVERY_SEED = (
    "; the compiled forward is specialised to one set of shapes, dtypes and non-tensor "
    "values, so they must be the same for every seed (draw only tensor values at random)"
)


def problem_functions(module: ModuleType, names: Sequence[str], label: str) -> dict[str, Any]:
    """The problem module's functions by name, None where a name is absent: both loaders
    read their entry points here, so a name bound to something not callable fails alike."""
    funcs: dict[str, Any] = {}
    for name in names:
        fn = getattr(module, name, None)
        if fn is not None and not callable(fn):
            raise ProblemError(label, f"{name} is not callable")
        funcs[name] = fn
    return funcs


def check_forward_inputs(inputs: Sequence[Any], what: str, label: str) -> None:
    """An input list the gates can handle: tensors and plain values side by side, at least
    one tensor, no tensor inside a list, tuple or dict (each gate moves, copies, poisons
    and reshapes the inputs one by one; a nested tensor would be passed along unchecked).
    A dataclass of the file's is such a container too (``kernelopt.pyfile`` makes it one)."""
    import torch

    for i, value in enumerate(inputs):
        if not isinstance(value, torch.Tensor) and _holds_tensor(value):
            kind = type(value).__name__
            raise ProblemError(
                label,
                f"{what}[{i}] is a {kind} holding tensors; kernelopt passes forward inputs "
                "as separate arguments: return each tensor on its own "
                "(forward(self, *xs) takes them back as a tuple)",
            )
        _refuse_unusual(value, f"{what}[{i}]", "inputs", label)
    if not any(isinstance(x, torch.Tensor) for x in inputs):
        raise ProblemError(label, f"{what} returned no tensor")


def check_dense_outputs(outputs: Sequence[Any], label: str) -> None:
    """The forward's flat outputs are dense tensors or plain values (else a clear refusal
    rather than a crash deep in a gate that saves, poisons or compares them)."""
    for i, leaf in enumerate(outputs):
        _refuse_unusual(leaf, f"output {i} of the forward", "outputs", label)


def _refuse_unusual(value: Any, where: str, role: str, label: str) -> None:
    import torch

    if isinstance(value, torch.Tensor) and (kind := unusual_tensor(value)):
        verb = "pass" if role == "inputs" else "return"
        raise ProblemError(
            label,
            f"{where} is {kind}; the gates save, copy, poison and compare {role} as dense "
            f"(strided) tensors, and Inductor compiles only those: {verb} the dense tensor "
            "(for example `.to_dense()`, `.dequantize()`, `.to_padded_tensor(0)`)",
        )


def unusual_tensor(t: Any) -> str:
    """What makes ``t`` other than a dense tensor with storage ('' when nothing does)."""
    import torch

    if t.is_nested:
        return "a nested tensor"
    if t.layout != torch.strided:
        return f"a {str(t.layout).removeprefix('torch.')} tensor"
    if t.is_quantized:
        return "a quantized tensor"
    return ""


def _holds_tensor(value: Any) -> bool:
    import torch
    from torch.utils._pytree import tree_leaves

    return any(isinstance(x, torch.Tensor) for x in tree_leaves(value))


class KindRuntime(Protocol):
    """What a problem's kind adds at run time (``kernelopt.kinds.base.Kind`` implements it).

    Declared here, below the kinds, so a ``LoadedProblem`` can carry its kind
    and the gates can ask it for checks and a baseline without importing a kind.
    """

    @property
    def own_baseline(self) -> bool: ...

    def check_runtime(self, problem: LoadedProblem, device: str, seed: int) -> None: ...

    def baseline_model(self, problem: LoadedProblem, device: str, seed: int) -> Any: ...


class ModuleRuntime:
    """A KernelBench module's run time: no checks beyond building Model, no own baseline.

    (Its baseline is ``torch.compile(Model)``, which the compile step captures.)
    """

    own_baseline = False

    def check_runtime(self, problem: LoadedProblem, device: str, seed: int) -> None:
        return None

    def baseline_model(self, problem: LoadedProblem, device: str, seed: int) -> Any:
        return None


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
    runtime: KindRuntime = field(default_factory=ModuleRuntime, compare=False)

    @property
    def own_baseline(self) -> bool:
        """True when the file brings its baseline (a kernel), False when it is compiled."""
        return self.runtime.own_baseline

    def check_runtime(self, device: str, seed: int) -> None:
        """The kind's checks before the reference runs (memory, determinism); a ProblemError."""
        self.runtime.check_runtime(self, device, seed)

    def baseline_model(self, device: str, seed: int) -> Any:
        """The file's own baseline as a module on ``device``; None when the baseline is compiled."""
        return self.runtime.baseline_model(self, device, seed)

    @property
    def resolved_mode(self) -> str:
        return resolve_mode("auto", self.mode)[0]

    @property
    def source_sha256(self) -> str:
        return hashlib.sha256(self.source.encode("utf-8")).hexdigest()

    def make_init_inputs(self, seed: int) -> list[Any]:
        return seeded(seed, lambda: list(self.get_init_inputs()))

    def build(self, cls: type, seed: int) -> Any:
        """``cls(*get_init_inputs())`` with weights drawn from ``seed`` (Model and ModelNew alike);
        lazy modules (``nn.LazyLinear``) get their shapes from one call on the seed's inputs."""
        init = self.make_init_inputs(seed)
        model = seeded(seed, lambda: cls(*init))
        return seeded(seed, lambda: _materialise_lazy(model, lambda: self.make_inputs(seed, "cpu")))

    def make_model(self, seed: int, device: str = "cuda", dtype: Any = None) -> Any:
        """``Model(*get_init_inputs())`` with weights drawn from ``seed`` (on the CPU, then moved).

        The model is left in the mode its constructor gives it (training mode,
        as KernelBench evaluates it): batch-norm then normalises with batch
        statistics, which is what the reference computation means.  A file's
        ``KERNELOPT_MODE`` overrides that, as it does in the gates.
        """
        model = apply_mode(self.build(self.model_class, seed), self.resolved_mode)
        if dtype is not None:
            model = model.to(dtype=dtype)
        return model.to(device)

    def make_inputs(self, seed: int, device: str = "cuda", dtype: Any = None) -> list[Any]:
        """``get_inputs()`` drawn from ``seed`` (CPU RNG, so identical on every machine)."""
        return [_to(x, device, dtype) for x in seeded(seed, self.get_inputs)]

    def make_holdout_inputs(
        self, seed: int, device: str = "cuda", dtype: Any = None
    ) -> list[list[Any]]:
        """Held-out input sets (empty when the problem defines none)."""
        if self.get_holdout_inputs is None:
            return []
        cases = seeded(seed, self.get_holdout_inputs)
        return [[_to(x, device, dtype) for x in case] for case in cases]


def _materialise_lazy(model: Any, inputs: Callable[[], list[Any]]) -> Any:
    """``model`` with its lazy parameters made, by one call as torch documents it; what that
    call changed besides them (batch-norm statistics, a counter) is put back.

    The call is the first ``forward`` its class inherits: a ``ModelNew(Model)`` makes them
    as ``Model`` does, since its own forward may be generated code that expects them made.
    """
    import torch
    from torch.nn.parameter import is_lazy

    if not isinstance(model, torch.nn.Module):
        return model
    if not any(is_lazy(t) for t in [*model.parameters(), *model.buffers()]):
        return model
    kept = {k: v.detach().clone() for k, v in model.state_dict().items() if not is_lazy(v)}
    forward = next(
        (
            c.__dict__["forward"]
            for c in reversed(type(model).__mro__)
            if "forward" in c.__dict__ and not c.__module__.startswith("torch.")
        ),
        type(model).forward,  # a torch container's own (an nn.Sequential subclass)
    )
    with torch.no_grad():  # submodules are called as usual: their lazy pre-hooks run
        forward(model, *inputs())
    model.load_state_dict(kept, strict=False)
    return model


def another_batch(
    values: list[Any], more: Callable[[], list[Any]], *, grow: bool = False
) -> list[Any]:
    """``values`` at another leading batch size: the checker's held-out shape for a file
    that defines none (``gates/jobs/reference.py``), and what a shape-general candidate
    must also run (the regeneration family).

    Every tensor whose first dimension is the first tensor's batch size gets one row
    fewer, or, when the batch is 1 or with ``grow``, the first row of the same tensor of
    ``more()`` (the next draw) appended: a kernel that hard-codes the batch size is wrong
    there.  ValueError when no tensor has a batch dimension.
    """
    import torch

    first = next((v for v in values if isinstance(v, torch.Tensor) and v.dim() >= 1), None)
    if first is None:
        raise ValueError("no tensor input with a batch dimension")
    batch = int(first.shape[0])

    def batched(v: Any) -> bool:
        return isinstance(v, torch.Tensor) and v.dim() >= 1 and v.shape[0] == batch

    if batch >= 2 and not grow:
        return [v[: batch - 1].clone() if batched(v) else v for v in values]
    return [torch.cat([v, w[:1]]) if batched(v) else v for v, w in zip(values, more(), strict=True)]


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
        return [_kernel_input_to(x, device) for x in seeded(seed, self.get_inputs)]

    def holdout_inputs(self, seed: int, device: str = "cpu") -> list[list[Any]]:
        if self.get_holdout_inputs is None:
            return []
        cases = seeded(seed, self.get_holdout_inputs)
        return [[_kernel_input_to(x, device) for x in case] for case in cases]

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

    def as_loaded(self, runtime: KindRuntime) -> LoadedProblem:
        """This problem as a ``LoadedProblem`` (Model = reference) that ``runtime`` serves."""
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
            runtime=runtime,
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
    "KindRuntime",
    "LoadedProblem",
    "ModuleRuntime",
    "apply_mode",
    "resolve_mode",
    "seeded",
]
