"""Finding or writing the harness files ``harness_runner`` runs for the kernel being profiled.

A harness is a Python file with ``get_args()`` and ``call(args)`` (see
``harness_runner``).  Candidates, in order of preference (the profiler uses
the first that actually runs):

1. the caller's harness (``ProfileInput.harness``);
2. "captured": the kernel on the exact arguments it saw inside the model,
   through the compile package's ``KernelHarness`` (the baseline wrapper run
   once with a probe on every launch; baseline configs pinned).  The root
   state launches the captured kernel object itself; a kernel target's other
   states load their source and launch it through the entry point the gates
   call (``state_launch``: ``launch(*args)``, else ``<kernel>.run``);
   "forward": a forward target's other states (``ModelNew`` candidates) run
   their forward on the captured model arguments, as the gates do;
3. "self": the kernel source already is a harness (Inductor's
   ``benchmark_kernel=True`` modules define ``get_args`` and ``call``);
4. "built": from the segment's launch record of the target's kernel --
   tensors with the recorded shapes, strides and dtypes (random values: a
   profile needs the work, not the numbers) and the recorded scalars; for a
   fusion-group state, from the group's signature (what its ``launch`` takes).

A state whose source fits no contract form gets no harness but a one-line
reason (``missing``), so the profile says why rather than a traceback.
"""

from __future__ import annotations

import ast
import json
from pathlib import Path

from kernelopt.contracts.compiled import KernelArg, SearchTarget, SegmentResult, TargetKind
from kernelopt.contracts.search import ProfileInput
from kernelopt.profiling.dominant import profiled_kernel
from kernelopt.profiling.state_launch import (
    FORM_FORWARD,
    FORM_INDUCTOR,
    StateNotLaunchable,
    state_form,
)
from kernelopt.store import ArtifactStore

HARNESS_TEMPLATE = '''\
"""Standalone harness for {kernel} (written by kernelopt.profiling.harness_files)."""

import importlib.util
import json

import torch

SOURCE = {source!r}
KERNEL = {kernel!r}
FORM = {form!r}
ARGS = json.loads({args!r})
DEVICE = "cuda"
_MOD = None


def _module():
    global _MOD
    if _MOD is None:
        spec = importlib.util.spec_from_file_location("kernelopt_profiled_kernel", SOURCE)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        _MOD = module
    return _MOD


def _dtype(name):
    return getattr(torch, name.replace("torch.", ""), torch.float32)


def get_args():
    gen = torch.Generator(device=DEVICE)
    gen.manual_seed(0)
    out = []
    for arg in ARGS:
        spec = arg.get("tensor")
        if spec is None:
            out.append(arg.get("value"))
            continue
        dtype = _dtype(spec["dtype"])
        shape, stride = spec["shape"], spec["stride"]
        extent = 1 + sum((s - 1) * st for s, st in zip(shape, stride)) if all(shape) else 0
        flat = torch.empty(max(extent, 1), dtype=dtype, device=DEVICE)
        if flat.is_floating_point():
            flat.normal_(generator=gen)
        else:
            flat.zero_()
        out.append(torch.as_strided(flat, shape, stride))
    return out


def kernels():
    module = _module()
    return [getattr(module, KERNEL)] if hasattr(module, KERNEL) else []


def call(args):
    from kernelopt.profiling.state_launch import FORM_INDUCTOR, kernel_launcher

    stream = {{"stream": torch.cuda.current_stream().cuda_stream}} if FORM == FORM_INDUCTOR else {{}}
    kernel_launcher(_module(), FORM, KERNEL)(args, stream)


if __name__ == "__main__":
    call(get_args())
    torch.cuda.synchronize()
'''


CAPTURED_TEMPLATE = '''\
"""Harness for {kernel} on the arguments it saw inside the model (kernelopt.compile.standalone_kernels)."""

import importlib.util
from pathlib import Path

from kernelopt.compile.standalone_kernels import KernelHarness
from kernelopt.contracts.compiled import CompileResult
from kernelopt.store import open_store

COMPILED = {compiled!r}
SOURCE = {source!r}
KERNEL = {kernel!r}
IS_ROOT = {is_root!r}
FORM = {form!r}
_STATE = {{}}


def _module():
    if "module" not in _STATE:
        spec = importlib.util.spec_from_file_location("kernelopt_profiled_state", SOURCE)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        _STATE["module"] = module
    return _STATE["module"]


def get_args():
    compiled = CompileResult.model_validate_json(Path(COMPILED).read_text())
    launch = KernelHarness(compiled, open_store()).kernel(KERNEL)
    _STATE["launch"] = launch
    return launch.fresh_args()


def kernels():
    launch = _STATE.get("launch")
    if IS_ROOT:
        return [launch.kernel] if launch is not None else []
    module = _module()
    return [getattr(module, KERNEL)] if hasattr(module, KERNEL) else []


def call(args):
    launch = _STATE["launch"]
    if IS_ROOT:
        launch.kernel.run(*args, **launch.kwargs)
        return
    if "entry" not in _STATE:
        from kernelopt.profiling.state_launch import kernel_launcher

        _STATE["entry"] = kernel_launcher(_module(), FORM, KERNEL)
    _STATE["entry"](args, launch.kwargs)
'''


FORWARD_TEMPLATE = '''\
"""Harness for a forward state: its ModelNew on the captured model arguments, as the gates run it."""

from pathlib import Path

from kernelopt.compile.restitch import forward_layout, plain_inputs, problem_mode
from kernelopt.compile.runtime import ForwardRunner, load_tensors
from kernelopt.contracts.compiled import CompileResult
from kernelopt.store import open_store

COMPILED = {compiled!r}
SOURCE = {source!r}
DEVICE = "cuda"
_STATE = {{}}


def get_args():
    compiled = CompileResult.model_validate_json(Path(COMPILED).read_text())
    store = open_store()
    init = load_tensors(store, compiled.init_inputs, DEVICE) if compiled.init_inputs else []
    _STATE["runner"] = ForwardRunner(
        Path(SOURCE).read_text(),
        list(compiled.arg_names),
        list(compiled.arg_roles),
        compiled.problem.seed,
        init,
        DEVICE,
        **forward_layout(
            compiled, problem_mode(compiled, store), plain_inputs(compiled, store)
        ),
    )
    return load_tensors(store, compiled.args, DEVICE)


def kernels():
    return []


def call(args):
    return _STATE["runner"].call(list(args))  # ForwardRunner.call empties the list it is given
'''


def is_self_harness(source: str) -> bool:
    """Does the source itself define get_args() and call(args) at module level?"""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return False
    names = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
    return {"get_args", "call"} <= names


def launch_args(segment: SegmentResult, target: SearchTarget, name: str = "") -> list[KernelArg]:
    """The recorded arguments of the (given or first) kernel's first launch (empty if unknown)."""
    if not target.kernels:
        return []
    name = name or target.kernels[0]
    for kernel in segment.kernels:
        if kernel.name == name:
            if kernel.launches and kernel.launches[0].args:
                return list(kernel.launches[0].args)
            return list(kernel.args)
    return []


def build_harness(
    kernel: str, source_path: Path, args: list[KernelArg], form: str = FORM_INDUCTOR
) -> str:
    """A standalone harness launching ``kernel`` (in ``form``) on random tensors laid out as ``args``."""
    payload = [
        {
            "name": a.name,
            "tensor": a.tensor.model_dump() if a.tensor is not None else None,
            "value": a.value,
        }
        for a in args
    ]
    return HARNESS_TEMPLATE.format(
        kernel=kernel, source=str(source_path), args=json.dumps(payload), form=form
    )


def _compile_harness_available() -> bool:
    try:
        from kernelopt.compile.standalone_kernels import KernelHarness  # noqa: F401
    except ImportError:
        return False
    return True


def _state_form(inp: ProfileInput, source: str, is_root: bool) -> str:
    """How the state is launched: the root as Inductor's kernel, any other state by its contract form.

    Raises ``StateNotLaunchable`` with the one-line reason when the source fits no form.
    """
    if is_root:
        return FORM_INDUCTOR
    form = state_form(inp.target, source)
    if inp.target.kind == TargetKind.FUSION_GROUP and not inp.target.signature:
        raise StateNotLaunchable("the fusion group records no signature to launch its state on")
    return form


def candidate_harnesses(
    inp: ProfileInput, store: ArtifactStore, directory: Path
) -> tuple[list[tuple[Path, str]], list[str]]:
    """Every harness we could run, best first, and why the others are missing."""
    directory.mkdir(parents=True, exist_ok=True)
    found: list[tuple[Path, str]] = []
    missing: list[str] = []
    if inp.harness is not None:
        found.append((store.materialize(inp.harness, directory, "harness_given.py"), "given"))
    source = store.get_text(inp.source)
    state_path = directory / "kernel_state.py"
    state_path.write_text(source)
    kernel, _ = profiled_kernel(inp.target, inp.kernel_times)
    is_root = inp.target.source is not None and inp.target.source.sha256 == inp.source.sha256
    try:
        form = _state_form(inp, source, is_root)
    except StateNotLaunchable as exc:
        return found, [f"the state cannot be launched: {exc}"]
    compiled_path = directory / "compiled.json"
    if not kernel and form != FORM_FORWARD:
        missing.append("the target names no kernel")
    elif not _compile_harness_available():
        missing.append("kernelopt.compile.standalone_kernels is not available")
    elif form == FORM_FORWARD:
        compiled_path.write_text(inp.compiled.model_dump_json())
        path = directory / "harness_forward.py"
        path.write_text(
            FORWARD_TEMPLATE.format(compiled=str(compiled_path), source=str(state_path))
        )
        found.append((path, "forward"))
    elif is_root or inp.target.kind != TargetKind.FUSION_GROUP:
        # a group state's launch takes the group's signature, not one captured kernel's arguments
        compiled_path.write_text(inp.compiled.model_dump_json())
        path = directory / "harness_captured.py"
        path.write_text(
            CAPTURED_TEMPLATE.format(
                kernel=kernel,
                compiled=str(compiled_path),
                source=str(state_path),
                is_root=is_root,
                form=form,
            )
        )
        found.append((path, "captured"))
    if is_self_harness(source):
        path = directory / "harness_self.py"
        path.write_text(source)
        found.append((path, "self"))
    if form == FORM_FORWARD:
        return found, missing
    group = not is_root and inp.target.kind == TargetKind.FUSION_GROUP
    args = list(inp.target.signature) if group else launch_args(inp.segment, inp.target, kernel)
    unknown = [a.name for a in args if a.tensor is None and a.value is None]
    if not args or not kernel:
        missing.append("the segment records no launch arguments for this target")
    elif unknown:
        missing.append(f"the launch record lacks the layout of {', '.join(unknown)}")
    else:
        path = directory / "harness_built.py"
        path.write_text(build_harness(kernel, state_path, args, form))
        found.append((path, "built"))
    return found, missing


def resolve_harness(
    inp: ProfileInput, store: ArtifactStore, directory: Path
) -> tuple[Path | None, str]:
    """The preferred harness and how it was found, or (None, why there is none)."""
    found, missing = candidate_harnesses(inp, store, directory)
    if found:
        return found[0]
    return None, "no harness: " + "; ".join(missing)
