"""Helion kernels: the autotuned baseline config, pinning, and the optional-extra message.

The baseline of a Helion problem is the kernel *after Helion's own
autotuning* -- what its author would ship.  On a GPU every ``@helion.kernel``
is autotuned (``Kernel.autotune(args, force=True)``) on the arguments it
receives during one ``launch(*inputs)`` call, with the effort

    the file's ``AUTOTUNE_EFFORT``, else ``$KERNELOPT_HELION_EFFORT``,
    else ``quick`` (``DEFAULT_EFFORT``)

and the result is cached under ``$KERNELOPT_HOME/kinds/helion`` by problem
text, kernel, argument shapes, GPU and Helion version -- so the compile step
tunes once and every later process (gate children, ``kernelopt verify``)
reuses the same config.  ``none`` (and every CPU run: the Triton interpreter
cannot time anything) means no autotuning: the kernel's declared
``config=``, else Helion's default config for the shapes.  The baseline and
every variant then run with exactly one config per kernel (``pinned``), so
no process re-tunes behind the checker's back.
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kernelopt.errors import ProblemError
from kernelopt.kinds.detect import HELION_INSTALL_HINT
from kernelopt.loaded_problem import KernelProblem

DEFAULT_EFFORT = "quick"
EFFORT_ENV = "KERNELOPT_HELION_EFFORT"
EFFORTS = ("none", "quick", "full")


def require_helion(label: str) -> Any:
    """``import helion`` or a ``ProblemError`` that says how to install it."""
    try:
        import helion
    except ImportError as exc:
        raise ProblemError(
            label, f"this is a Helion kernel problem, but {HELION_INSTALL_HINT}"
        ) from exc
    return helion


def helion_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("helion")
    except PackageNotFoundError:
        return "unknown"


def pinned(kernel: Any, config: dict[str, Any]) -> Any:
    """A copy of a ``@helion.kernel`` that always runs ``config`` (never autotunes)."""
    import helion

    return helion.Kernel(kernel.fn, configs=[helion.Config(**config)], settings=kernel.settings)


def effort_for(problem: KernelProblem, device: str) -> str:
    if not device.startswith("cuda"):
        return "none"
    effort = problem.autotune_effort or os.environ.get(EFFORT_ENV) or DEFAULT_EFFORT
    if effort not in EFFORTS:
        raise ProblemError(
            problem.path, f"{EFFORT_ENV}={effort!r}: use one of {', '.join(EFFORTS)}"
        )
    return effort


@dataclass
class BaselineConfigs:
    """Kernel name -> config of the baseline, and how they were chosen."""

    configs: dict[str, dict[str, Any]]
    effort: str
    how: dict[str, str] = field(default_factory=dict)  # kernel -> "autotuned" / "declared" / ...
    seconds: float = 0.0
    cached: bool = False
    device_name: str = ""

    def describe(self) -> str:
        kinds = ", ".join(f"{k}: {v}" for k, v in self.how.items())
        if self.effort == "none":
            return f"Helion kernel(s) without autotuning ({kinds})"
        cache = ", cached" if self.cached else ""
        return (
            f"Helion kernel(s) after Helion's own autotuning (effort {self.effort!r}, "
            f"{self.seconds:.0f} s{cache}, helion {helion_version()}, {self.device_name}; {kinds})"
        )


def plain_config(config: Any, kernel: str) -> dict[str, Any]:
    """A Helion config as plain JSON data: it travels in source text, markers and caches."""
    try:
        return json.loads(json.dumps(dict(config)))
    except (TypeError, ValueError) as exc:
        raise ProblemError(kernel, f"Helion config is not plain data: {exc}") from exc


def _default_or_declared(kernel: Any, args: tuple) -> tuple[dict[str, Any], str]:
    if kernel.configs:
        return plain_config(kernel.configs[0], kernel.name), "declared config"
    bound = kernel.bind(args)
    return plain_config(bound.config_spec.default_config(), kernel.name), "Helion's default config"


def _signature_of(args: tuple) -> list[Any]:
    import torch

    return [
        [list(a.shape), str(a.dtype)] if isinstance(a, torch.Tensor) else repr(a)[:40] for a in args
    ]


def kernel_arguments(problem: KernelProblem, inputs: list[Any]) -> dict[str, tuple]:
    """The arguments each Helion kernel receives during one ``launch(*inputs)`` call.

    Kernels are swapped for recorders that run them with their declared or
    default config (so nothing autotunes while we look), then put back.
    """
    import torch

    module = problem.module
    originals = {name: getattr(module, name) for name in problem.kernels}
    recorded: dict[str, tuple] = {}

    def recorder(name: str, kernel: Any) -> Any:
        def call(*args: Any) -> Any:
            clones = tuple(a.clone() if isinstance(a, torch.Tensor) else a for a in args)
            recorded.setdefault(name, clones)
            config, _ = _default_or_declared(kernel, args)
            return pinned(kernel, config)(*args)

        return call

    try:
        for name, kernel in originals.items():
            setattr(module, name, recorder(name, kernel))
        with torch.no_grad():
            getattr(module, problem.entry)(*inputs)
    finally:
        for name, kernel in originals.items():
            setattr(module, name, kernel)
    missing = [n for n in problem.kernels if n not in recorded]
    if missing:
        raise ProblemError(
            problem.path,
            f"{problem.entry}() never called the Helion kernel(s) {', '.join(missing)}: "
            "a Helion problem's launcher must run its kernels",
        )
    return recorded


def _cache_path(problem: KernelProblem, name: str, args: tuple, effort: str, device: str) -> Path:
    import torch

    from kernelopt.config import Settings

    gpu = torch.cuda.get_device_name(torch.device(device)) if device.startswith("cuda") else "cpu"
    key = json.dumps(
        {
            "source": problem.source_sha256,
            "kernel": name,
            "args": _signature_of(args),
            "effort": effort,
            "gpu": gpu,
            "helion": helion_version(),
        },
        sort_keys=True,
    )
    digest = hashlib.sha256(key.encode()).hexdigest()[:32]
    return Settings.from_env().home / "kinds" / "helion" / f"{problem.name}-{name}-{digest}.json"


def autotune(kernel: Any, args: tuple, effort: str, seed: int) -> dict[str, Any]:
    """Helion's own autotuner at ``effort`` on ``args`` (a private copy of the kernel)."""
    import helion

    settings = copy.copy(kernel.settings)
    settings.autotune_effort = effort
    settings.autotune_random_seed = seed
    tuner = helion.Kernel(kernel.fn, configs=[], settings=settings)
    return plain_config(tuner.autotune(list(args), force=True), kernel.name)


def baseline_configs(problem: KernelProblem, device: str, seed: int = 0) -> BaselineConfigs:
    """The config every kernel of ``problem`` runs with in the baseline (autotuned on CUDA)."""
    import torch

    require_helion(problem.path)
    effort = effort_for(problem, device)
    inputs = problem.inputs(seed, device)
    args_by_kernel = kernel_arguments(problem, inputs)
    device_name = (
        torch.cuda.get_device_name(torch.device(device)) if device.startswith("cuda") else "cpu"
    )
    chosen = BaselineConfigs(configs={}, effort=effort, device_name=device_name, cached=True)
    for name in problem.kernels:
        kernel, args = getattr(problem.module, name), args_by_kernel[name]
        if effort == "none":
            chosen.configs[name], chosen.how[name] = _default_or_declared(kernel, args)
            continue
        path = _cache_path(problem, name, args, effort, device)
        if path.is_file():
            entry = json.loads(path.read_text())
            chosen.configs[name], chosen.how[name] = entry["config"], "autotuned"
            chosen.seconds += float(entry.get("seconds", 0.0))
            continue
        chosen.cached = False
        t0 = time.monotonic()
        try:
            config = autotune(kernel, args, effort, seed)
        except Exception as exc:
            raise ProblemError(
                problem.path, f"Helion could not autotune {name}: {type(exc).__name__}: {exc}"
            ) from exc
        seconds = time.monotonic() - t0
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".tmp{os.getpid()}")
        tmp.write_text(json.dumps({"config": config, "seconds": seconds, "effort": effort}))
        tmp.replace(path)
        chosen.configs[name], chosen.how[name] = config, "autotuned"
        chosen.seconds += seconds
    return chosen
