"""What a profile harness launches for a state: the entry point the gates call for its source.

The root state is Inductor's own kernel, but a state the search accepted is an
LLM candidate in one of the candidate contract's forms
(``kernelopt.compile.contract``): a module defining ``launch(*args)`` (which may
also bind the kernel's name to that Python function), an Inductor-form kernel
launched as ``<kernel>.run(...)``, or a ``class ModelNew`` for a forward target.
The form is chosen by ``restitch.detect_form``, so a harness runs exactly what
re-stitching and the gates ran, whatever else the module defines.
"""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType
from typing import Any

from kernelopt.compile.restitch import (
    FORM_FORWARD,
    FORM_INDUCTOR,
    FORM_LAUNCH,
    ReplacementError,
    detect_form,
)
from kernelopt.contracts.compiled import SearchTarget

__all__ = [
    "FORM_FORWARD",
    "FORM_INDUCTOR",
    "FORM_LAUNCH",
    "StateNotLaunchable",
    "kernel_launcher",
    "state_form",
]

Launcher = Callable[[list[Any], dict[str, Any]], Any]


class StateNotLaunchable(Exception):
    """A state's source gives a harness nothing to launch; the message is the one-line reason."""


def state_form(target: SearchTarget, source: str) -> str:
    """The contract form of a state's source (``detect_form``), its refusal as ``StateNotLaunchable``."""
    try:
        return detect_form(target, source)
    except ReplacementError as exc:
        raise StateNotLaunchable(str(exc)) from exc


def _bare_triton(value: Any) -> bool:
    """A plain ``@triton.jit`` / ``@triton.autotune`` object: its ``run`` needs a grid, not a stream."""
    try:
        from triton.runtime.autotuner import Autotuner, Heuristics
        from triton.runtime.jit import JITFunction
    except ImportError:
        return False
    return isinstance(value, JITFunction | Autotuner | Heuristics)


def kernel_launcher(module: ModuleType, form: str, kernel: str) -> Launcher:
    """``entry(args, kwargs)`` running a kernel or fusion-group state on a kernel's arguments.

    ``args`` are the original launch's positional arguments (or a group's
    signature) and ``kwargs`` its keywords (``stream``): the launch form takes
    the positional ones only, as in the re-stitched wrapper; an Inductor-form
    kernel takes both, as in the baseline wrapper.
    """
    if form == FORM_LAUNCH:
        entry = getattr(module, "launch", None)
        if not callable(entry):
            raise StateNotLaunchable("the state's launch is not callable")
        return lambda args, kwargs: entry(*args)
    if form == FORM_INDUCTOR:
        value = getattr(module, kernel, None)
        run = getattr(value, "run", None)
        if not callable(run) or _bare_triton(value):
            raise StateNotLaunchable(
                f"the state's {kernel} is not an Inductor kernel (@triton_heuristics + @triton.jit)"
            )
        return lambda args, kwargs: run(*args, **kwargs)
    raise StateNotLaunchable(f"a {form}-form state is not launched on one kernel's arguments")
