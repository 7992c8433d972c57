"""Finding or writing a standalone harness for the kernel state being profiled.

A harness is a Python file with ``get_args()`` and ``call(args)`` (see
``harness_runner``).  In order of preference:

1. the caller's harness (``ProfileInput.harness``), e.g. from the compile step;
2. ``kernelopt.compile.harness.write_harness(inp, store, directory)`` if the
   compile package provides one (looked up lazily);
3. the kernel source itself, when it already is one (Inductor's
   ``benchmark_kernel=True`` modules define ``get_args`` and ``call``);
4. a harness written here from the segment's launch record of the target's
   kernel: tensors with the launch's shapes, strides and dtypes (random
   values: the profile needs the work, not the numbers) and the launch's
   scalars, calling ``<kernel>.run(*args, stream=...)`` for Inductor-form
   sources or ``launch(*args)`` for launch-form ones.
"""

from __future__ import annotations

import ast
import json
from pathlib import Path

from kernelopt.contracts.compiled import KernelArg, SearchTarget, SegmentResult
from kernelopt.contracts.search import ProfileInput
from kernelopt.store import ArtifactStore

HARNESS_TEMPLATE = '''\
"""Standalone harness for {kernel} (written by kernelopt.profiling.harness)."""

import importlib.util
import json

import torch

SOURCE = {source!r}
KERNEL = {kernel!r}
ARGS = json.loads({args!r})
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
    gen = torch.Generator(device="cuda")
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
        flat = torch.empty(max(extent, 1), dtype=dtype, device="cuda")
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
    module = _module()
    if hasattr(module, KERNEL):
        getattr(module, KERNEL).run(*args, stream=torch.cuda.current_stream().cuda_stream)
    else:
        module.launch(*args)


if __name__ == "__main__":
    call(get_args())
    torch.cuda.synchronize()
'''


def is_self_harness(source: str) -> bool:
    """Does the source itself define get_args() and call(args) at module level?"""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return False
    names = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
    return {"get_args", "call"} <= names


def launch_args(segment: SegmentResult, target: SearchTarget) -> list[KernelArg]:
    """The recorded arguments of the target kernel's first launch (empty if unknown)."""
    if not target.kernels:
        return []
    for kernel in segment.kernels:
        if kernel.name == target.kernels[0]:
            if kernel.launches and kernel.launches[0].args:
                return list(kernel.launches[0].args)
            return list(kernel.args)
    return []


def build_harness(kernel: str, source_path: Path, args: list[KernelArg]) -> str:
    payload = [
        {
            "name": a.name,
            "tensor": a.tensor.model_dump() if a.tensor is not None else None,
            "value": a.value,
        }
        for a in args
    ]
    return HARNESS_TEMPLATE.format(kernel=kernel, source=str(source_path), args=json.dumps(payload))


def resolve_harness(
    inp: ProfileInput, store: ArtifactStore, directory: Path
) -> tuple[Path | None, str]:
    """A harness path and how it was found, or (None, why there is none)."""
    directory.mkdir(parents=True, exist_ok=True)
    if inp.harness is not None:
        return store.materialize(inp.harness, directory, "harness.py"), "given"
    try:
        from kernelopt.compile import harness as compile_harness  # type: ignore[attr-defined]
    except ImportError:
        compile_harness = None
    writer = getattr(compile_harness, "write_harness", None) if compile_harness else None
    if writer is not None:
        return Path(writer(inp, store, directory)), "compile"
    source = store.get_text(inp.source)
    if is_self_harness(source):
        path = directory / "harness.py"
        path.write_text(source)
        return path, "self"
    args = launch_args(inp.segment, inp.target)
    if not args or not inp.target.kernels:
        return None, "no harness: the segment records no launch arguments for this target"
    unknown = [a.name for a in args if a.tensor is None and a.value is None]
    if unknown:
        return None, f"no harness: the launch record lacks the layout of {', '.join(unknown)}"
    kernel_path = directory / "kernel_state.py"
    kernel_path.write_text(source)
    path = directory / "harness.py"
    path.write_text(build_harness(inp.target.kernels[0], kernel_path, args))
    return path, "built"
