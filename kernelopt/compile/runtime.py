"""Run a (re-stitched) Inductor wrapper as if it were the model's forward.

``wrapper_forward`` is the stable entry point the model-level gates use: it
returns a callable that takes the module's own inputs (like ``Model.forward``)
and returns a tuple of output tensors, computed by the given wrapper with the
*captured* parameters and buffers -- the real weights, never regenerated.

Wrappers and candidate modules are written to files before import: Triton's
``@jit`` reads a function's source through ``inspect``, which needs a file,
and tracebacks then point at real lines.  Modules are cached by content hash,
so loading the same text twice compiles nothing twice.
"""

from __future__ import annotations

import io
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import Any

from kernelopt.compile import vector_isa
from kernelopt.compile.output_layout import STATE_PREFIXES, constant_value, picked, write_back
from kernelopt.contracts.base import ArtifactRef
from kernelopt.contracts.compiled import CompileResult
from kernelopt.errors import DeterministicError
from kernelopt.loaded_problem import apply_mode, seeded
from kernelopt.pyfile import code_dir, exec_file_once, safe_name, source_digest, write_source
from kernelopt.store import ArtifactStore


class WrapperLoadError(DeterministicError):
    """A wrapper or candidate module failed to import (syntax, compile error, missing name)."""


def _load_module(source: str, name: str, kind: str) -> ModuleType:
    """Import generated text through ``kernelopt.pyfile`` (the one loader of code files)."""
    module_name = f"kernelopt_{kind}_{safe_name(name)}_{source_digest(source, 20)}"
    path = write_source(code_dir("code", kind) / f"{module_name}.py", source)
    cpp = kind == "wrapper" and vector_isa.has_cpp_kernels(source)
    if cpp:
        vector_isa.answer_probes()
    try:
        return exec_file_once(path, module_name)
    except Exception as exc:
        raise WrapperLoadError(
            f"loading {kind} module {name} failed: {type(exc).__name__}: {exc}"
        ) from exc


def compile_in_process() -> None:
    """Load a compiled wrapper's kernels in this process, without Inductor's worker pool.

    The kernels are in the compiler caches already (compile put them there), so a
    pool only costs a sidecar and its workers importing torch beside us -- and it
    would outlive a killed child.  Gate children do the same through
    ``TORCHINDUCTOR_COMPILE_THREADS=1`` (``gates.runner.child_env``); triage and
    re-stitch children are started before their job is known, so they set it here.
    """
    from torch._inductor import config

    config.compile_threads = 1


def prepare_wrapper_process() -> None:
    """Triage's and re-stitch's set-up before they load a wrapper, in one place.

    Both must run the program the gates time (``strict_fp32``), load kernels
    without a worker pool, and create the CUDA context before their ``load``
    stage starts, so that stage times loading alone.
    """
    from kernelopt.compile.timing import init_cuda, require_cuda
    from kernelopt.precision import strict_fp32

    require_cuda()
    strict_fp32()
    compile_in_process()
    init_cuda()


def load_wrapper_module(source: str, name: str) -> ModuleType:
    """Import an Inductor wrapper's text as a module (its kernels compile on import)."""
    return _load_module(source, name, "wrapper")


def load_candidate_module(source: str, name: str) -> ModuleType:
    """Import a form-(b) candidate (a module defining ``launch(*args)``); used by re-stitched wrappers."""
    module = _load_module(source, name, "candidate")
    if not callable(getattr(module, "launch", None)):
        raise WrapperLoadError(f"candidate {name} defines no callable launch(*args)")
    return module


# --- tensors through the store ------------------------------------------------------------


def save_tensors(store: ArtifactStore, tensors: Sequence[Any], name: str) -> ArtifactRef:
    """``torch.save`` a list (CPU copies, strides kept) into the store."""
    import torch

    buf = io.BytesIO()
    torch.save([_cpu(t) for t in tensors], buf)
    return store.put_bytes(buf.getvalue(), media_type="application/x-torch", name=name)


def _cpu(value: Any) -> Any:
    import torch

    if isinstance(value, torch.Tensor):
        return value.detach().to("cpu")
    return value


def load_tensors(store: ArtifactStore, ref: ArtifactRef, device: str = "cpu") -> list[Any]:
    """Inverse of ``save_tensors``; tensors land on ``device`` with their strides."""
    import torch

    values = torch.load(io.BytesIO(store.get_bytes(ref)), map_location="cpu", weights_only=True)
    return [to_device(v, device) for v in values]


def to_device(value: Any, device: str) -> Any:
    """Move a tensor keeping its exact strides (the wrapper asserts them)."""
    import torch

    if not isinstance(value, torch.Tensor):
        return value
    moved = value.to(device)
    if moved.stride() == value.stride():
        return moved
    out = torch.empty_strided(value.size(), value.stride(), dtype=value.dtype, device=device)
    out.copy_(value)
    return out


# --- running wrappers ----------------------------------------------------------------------


def run_call(module: ModuleType, args: Sequence[Any]) -> tuple[Any, ...]:
    """``module.call`` clears the list it gets; hand it a fresh one every time."""
    out = module.call(list(args))
    return tuple(out) if isinstance(out, (tuple, list)) else (out,)


class ForwardRunner:
    """``call(args)`` for single-kernel mode: a candidate ``ModelNew`` with the captured weights.

    ``ModelNew`` has the same constructor as ``Model``; it is built under the
    problem's seed (so parameters created in the same order come out equal), and
    every captured parameter/buffer whose name and shape match then takes its place
    (the module holds the captured tensor itself), so the real weights flow through
    verification and an update in place, as of running statistics, lands where the
    baseline wrapper's would.  With the compile's layout (``input_index``,
    ``picks``, ``num_outputs``, ``state_outputs``) a call takes the flat arguments
    in the captured order and answers in the baseline wrapper's output order, so
    ``wrapper_forward`` picks and writes back both alike; without it (wrappers
    written before) the inputs go in flat order and the outputs come out as returned.
    """

    def __init__(
        self,
        source: str,
        arg_names: list[str],
        arg_roles: list[str],
        seed: int,
        init_inputs: Sequence[Any],
        device: str = "cuda",
        *,
        input_index: Sequence[int | None] | None = None,
        picks: Sequence[tuple[str, int]] | None = None,
        num_outputs: int | None = None,
        state_outputs: dict[int, str] | None = None,
        model_mode: str | None = None,
        constants: dict[int, Any] | None = None,
    ) -> None:

        module = _load_module(source, "forward_candidate", "candidate")
        model_new = getattr(module, "ModelNew", None)
        if not isinstance(model_new, type):
            raise WrapperLoadError("single-kernel candidate defines no class ModelNew")
        self.arg_names = arg_names
        self.arg_roles = arg_roles
        self.input_index = list(input_index) if input_index else None
        self.picks = [tuple(p) for p in picks] if picks is not None else None
        self.num_outputs = num_outputs
        self.state_outputs = {int(k): v for k, v in (state_outputs or {}).items()}
        self.constants = {int(k): v for k, v in (constants or {}).items()}
        self._orders: dict[int, list[tuple[int | None, Any]]] = {}  # by len(captured list)
        named = [j for kind, j in self.picks or [] if kind in ("output", "item")]
        # how many outputs the baseline wrapper's order has room for
        self._slots = max([num_outputs or 0, *(j + 1 for j in [*named, *self.state_outputs])])
        try:
            self.model = seeded(seed, lambda: model_new(*init_inputs)).to(device)
        except Exception as exc:
            raise WrapperLoadError(
                f"ModelNew(*get_init_inputs()) failed: {type(exc).__name__}: {exc}"
            ) from exc
        from torch.nn.parameter import is_lazy

        apply_mode(self.model, model_mode or "as_constructed")  # the mode the baseline ran in
        self._lazy = any(is_lazy(p) for p in self.model.parameters())
        self._loaded: list[int] | None = None
        # (submodule, attribute, the object it holds, the captured tensor behind it)
        self._held: list[tuple[Any, str, Any, Any]] = []

    def load_weights(self, args: Sequence[Any]) -> None:
        """Put the captured weights in, once per distinct set of weight tensors (not per call):
        the captured tensor itself where dtype and device agree, else a copy of it."""
        import torch

        ids = [id(v) for v, r in zip(args, self.arg_roles, strict=False) if r != "input"]
        if ids == self._loaded:
            return
        self._loaded = ids
        self._held = []
        for name, role, value in zip(self.arg_names, self.arg_roles, args, strict=False):
            if role not in ("parameter", "buffer"):
                continue
            place = _entry(self.model, name.split(":", 1)[1])
            if place is None:
                continue
            owner, leaf = place
            mine = getattr(owner, leaf)
            if mine.shape != value.shape:
                continue
            if mine.dtype == value.dtype and mine.device == value.device:
                self._held.append((owner, leaf, _hold(owner, leaf, value), value))
            else:
                with torch.no_grad():
                    mine.copy_(value)

    def call(self, args: list[Any]) -> tuple[Any, ...]:
        import torch
        from torch.utils._pytree import tree_flatten

        values = list(args)
        args.clear()
        inputs = self._inputs(values)
        if self._lazy:  # lazy modules take their shapes from a first call (on copies),
            # which must not move the random streams the caller seeded for the real one
            cuda = list(range(torch.cuda.device_count())) if torch.cuda.is_available() else []
            with torch.no_grad(), torch.random.fork_rng(devices=cuda):
                self.model(*[v.clone() if isinstance(v, torch.Tensor) else v for v in inputs])
            self._lazy = False
        self.load_weights(values)
        if torch.is_grad_enabled():
            with torch.no_grad():
                out = self._forward(inputs)
        else:  # the gates' timing children call it inside no_grad already
            out = self._forward(inputs)
        if self.picks is None:  # a wrapper written before the layout: as returned
            return tuple(out) if isinstance(out, (tuple, list)) else (out,)
        # leaves in the order the compiled graph returns them (dicts and nests included);
        # a tensor or a plain tuple/list of tensors is its own leaves (tree_flatten's
        # answer, without its microseconds on the timed path)
        if isinstance(out, torch.Tensor):
            return self._as_wrapper((out,))
        if type(out) in (tuple, list) and all(isinstance(o, torch.Tensor) for o in out):
            return self._as_wrapper(tuple(out))
        return self._as_wrapper(tuple(tree_flatten(out)[0]))

    def _forward(self, inputs: list[Any]) -> Any:
        out = self.model(*inputs)
        self._write_back()
        return out

    def _inputs(self, values: list[Any]) -> list[Any]:
        """The forward's inputs in its own order (the captured list may order them otherwise,
        e.g. an input changed in place first), with the plain values the compile baked in
        (a Python float or int among the inputs) in their places."""
        if self.input_index is None:
            return [v for v, r in zip(values, self.arg_roles, strict=False) if r == "input"]
        order = self._orders.get(len(values))
        if order is None:
            order = self._orders[len(values)] = self._input_order(len(values))
        return [values[i] if i is not None else baked for i, baked in order]

    def _input_order(self, count: int) -> list[tuple[int | None, Any]]:
        """Per forward position, in order: (the captured list's index, None), or (None, the
        value the compile baked in) where no captured argument goes there."""
        assert self.input_index is not None
        at = {p: i for i, p in enumerate(self.input_index[:count]) if p is not None}
        baked = {p: v for p, v in self.constants.items() if p not in at}
        return [(at[p], None) if p in at else (None, baked[p]) for p in sorted({*at, *baked})]

    def _write_back(self) -> None:
        """An entry the forward replaced (``self.avg = ...``) goes back into the captured
        tensor, which the module then holds again: the next call and the gates read it."""
        for i, (owner, leaf, held, captured) in enumerate(self._held):
            now = getattr(owner, leaf)
            if now is held:
                continue
            if hasattr(now, "shape") and now.shape == captured.shape:
                captured.copy_(now)
            self._held[i] = (owner, leaf, _hold(owner, leaf, captured), captured)

    def _as_wrapper(self, out: tuple[Any, ...]) -> tuple[Any, ...]:
        """The forward's results in the baseline wrapper's output order (``picks`` inverted;
        a stored state value from the module; what no pick names, None)."""
        import torch

        slots: list[Any] = [None] * self._slots
        for (kind, j), value in zip(self.picks or [], out, strict=False):
            if kind in ("output", "item") and j < len(slots) and slots[j] is None:
                slots[j] = torch.as_tensor(value) if kind == "item" else value
        for j, name in self.state_outputs.items():
            place = _entry(self.model, name)
            if place is not None and j < len(slots):
                slots[j] = getattr(*place)
        return tuple(slots)


def _entry(model: Any, key: str) -> tuple[Any, str] | None:
    """(submodule, attribute) of a state-dict key the module holds a tensor under, or None."""
    owner_path, _, leaf = key.rpartition(".")
    try:
        owner = model.get_submodule(owner_path) if owner_path else model
    except AttributeError:
        return None
    for table in (owner._parameters, owner._buffers):
        if table.get(leaf) is not None:
            return owner, leaf
    return None


def _hold(owner: Any, leaf: str, value: Any) -> Any:
    """Make ``owner.leaf`` the captured tensor itself (a parameter shares its storage);
    returns the object it now holds."""
    import torch

    if leaf in owner._parameters:
        owner._parameters[leaf] = torch.nn.Parameter(value, requires_grad=False)
        return owner._parameters[leaf]
    owner._buffers[leaf] = value
    return value


def wrapper_call(
    compiled: CompileResult,
    store: ArtifactStore,
    wrapper: ArtifactRef | None = None,
    device: str = "cuda",
) -> Callable[[list[Any]], tuple[Any, ...]]:
    """The wrapper's ``call(args)`` over the flat argument list (forward wrappers included)."""
    ref = wrapper or compiled.wrapper
    source = store.get_text(ref)
    module = load_wrapper_module(source, f"{compiled.problem.name}_{ref.short}")
    make_call = getattr(module, "make_call", None)
    if getattr(module, "KERNELOPT_FORWARD", False) and callable(make_call):
        init = load_tensors(store, compiled.init_inputs, device) if compiled.init_inputs else []
        return make_call(init, device)
    pin_configs(module, baseline_pins(compiled, store, source))
    return lambda args: run_call(module, args)


def wrapper_forward(
    compiled: CompileResult,
    store: ArtifactStore,
    wrapper: ArtifactRef | None = None,
    device: str = "cuda",
) -> Callable[..., tuple[Any, ...]]:
    """A callable taking the module's own inputs and returning its outputs as a tuple.

    Runs ``wrapper`` (default: the baseline wrapper) with the captured
    parameters and buffers; module inputs replace the captured inputs by
    position.  The wrapper is specialised to the captured shapes (it asserts
    sizes and strides): inputs of other shapes need their own compile.  The
    results are picked and the state the forward stores is written back into the
    captured entries as the compile recorded (``kernelopt.compile.output_layout``).
    """
    call = wrapper_call(compiled, store, wrapper, device)
    captured = load_tensors(store, compiled.args, device)
    positions = compiled.arg_input_index or [None] * len(captured)
    constants = [constant_value(c) for c in compiled.output_constants]

    def forward(*inputs: Any) -> tuple[Any, ...]:
        args = list(captured)
        for i, pos in enumerate(positions):
            if pos is None:
                continue
            if pos >= len(inputs):
                raise TypeError(f"forward expected at least {pos + 1} inputs, got {len(inputs)}")
            args[i] = _like(inputs[pos], captured[i])
        held = list(args)  # the wrapper's call empties its argument list
        outputs = call(args)
        write_back(outputs, compiled.state_outputs, entries)
        return picked(outputs, held, compiled.output_picks, constants)

    # the module's parameters and buffers among the captured args, by their module names:
    # the gates restore and compare the ones a stateful forward changes (gates.call_policy)
    entries = {
        name.split(":", 1)[1]: captured[i]
        for i, name in enumerate(compiled.arg_names)
        if name.startswith(STATE_PREFIXES) and i < len(captured)
    }
    forward.state_entries = entries  # type: ignore[attr-defined]
    return forward


def _like(value: Any, template: Any) -> Any:
    """Give an input the captured layout when only the strides differ."""
    import torch

    if not isinstance(value, torch.Tensor) or not isinstance(template, torch.Tensor):
        return value
    if value.shape == template.shape and value.stride() != template.stride():
        out = torch.empty_strided(
            template.size(), template.stride(), dtype=value.dtype, device=value.device
        )
        out.copy_(value)
        return out
    return value


# --- pinning Inductor's runtime autotuning ---------------------------------------------------


def chosen_configs(module: ModuleType, names: Sequence[str]) -> dict[str, dict[str, Any]]:
    """The launch config each kernel's autotuner settled on (after at least one run)."""
    out: dict[str, dict[str, Any]] = {}
    for name in names:
        launchers = getattr(getattr(module, name, None), "launchers", None)
        if not launchers or len(launchers) != 1:
            continue
        config = launchers[0].config
        out[name] = {
            "kwargs": {k: v for k, v in config.kwargs.items() if isinstance(v, (int, bool))},
            "num_warps": int(config.num_warps),
            "num_stages": int(config.num_stages),
        }
    return out


def _matches(config: Any, pin: dict[str, Any]) -> bool:
    return (
        dict(config.kwargs) == pin["kwargs"]
        and int(config.num_warps) == pin["num_warps"]
        and int(config.num_stages) == pin["num_stages"]
    )


def pin_configs(module: ModuleType, pins: dict[str, dict[str, Any]]) -> list[str]:
    """Make each pinned kernel launch with its recorded config, without re-autotuning.

    Inductor autotunes some kernels at their first launch (and, under
    max-autotune, runs coordinate descent); a fresh load of the same wrapper
    can settle on another config, and for reductions another config is
    another summation order.  Pinning makes every load of the baseline
    compute the same bits.  Best effort by design: a kernel whose autotuner
    does not look as expected is left alone (logged), never failed.
    Returns the names that could not be pinned.
    """
    from kernelopt.log import get_logger

    failed: list[str] = []
    for name, pin in pins.items():
        kernel = getattr(module, name, None)
        if kernel is None or not hasattr(kernel, "launchers"):
            continue
        try:
            if not kernel.launchers:
                kernel.precompile()
            match = [launcher for launcher in kernel.launchers if _matches(launcher.config, pin)]
            if match:
                launcher = match[0]
            else:
                import triton

                config = triton.Config(
                    dict(pin["kwargs"]), num_warps=pin["num_warps"], num_stages=pin["num_stages"]
                )
                launcher = kernel._precompile_config(config).make_launcher()
            launcher.config.found_by_coordesc = True  # no coordinate descent on top of a pin
            kernel.launchers = [launcher]
        except Exception as exc:  # diagnostics never fail a run (see docstring)
            failed.append(name)
            get_logger(__name__).warning(
                "could not pin kernel config", kernel=name, error=f"{type(exc).__name__}: {exc}"
            )
    return failed


def baseline_pins(compiled: CompileResult, store: ArtifactStore, source: str) -> dict[str, Any]:
    """The recorded pins that apply to ``source``: kernels whose text is the baseline's."""
    if not compiled.kernel_configs:
        return {}
    from kernelopt.compile.wrapper_parse import WrapperParseError, parse_wrapper

    baseline = store.get_text(compiled.wrapper)
    if source == baseline:
        return dict(compiled.kernel_configs)
    try:
        ours = parse_wrapper(source).kernels
        theirs = parse_wrapper(baseline).kernels
    except WrapperParseError:
        return {}
    return {
        name: pin
        for name, pin in compiled.kernel_configs.items()
        if name in ours and name in theirs and ours[name].source == theirs[name].source
    }
