"""Bad input is caught before submission: import and build the problem (and a candidate).

The CLI's ``ast`` checks catch typos in milliseconds, but a file that raises at
import, hangs, or whose ``get_inputs()`` does not fit ``forward`` would
otherwise reach a GPU activity minutes later.  Here the problem is imported,
its model built and its inputs made once, in a CPU-only child process with a
time limit, and the inputs are bound to ``forward`` (``reference`` / ``launch``
for kernel problems) without running it.  A failure is one line naming the
file, the line in it and the cause; the child keeps user code out of the CLI.

Run as ``python -m kernelopt.preflight_problem [--one-shape] PROBLEM [CANDIDATE]``: prints one
JSON object, ``{"ok": true}`` or ``{"ok": false, "where": ..., "cause": ...}``.
"""

from __future__ import annotations

import inspect
import json
import os
import subprocess
import sys
import traceback
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from kernelopt.errors import ProblemError

ONE_SHAPE_FLAG = "--one-shape"
DEFAULT_SECONDS = 90.0  # torch's import alone takes seconds on a busy machine
SECONDS_ENV = "KERNELOPT_PREFLIGHT_SECONDS"
# wraps the child's command line and environment in a sandbox that sees only the given
# files (``gates.sandbox.confine_preflight``): a candidate is untrusted code
Confine = Callable[[list[str], Mapping[str, str], list[Path]], tuple[list[str], dict[str, str]]]


# what torch says when CUDA is asked for where there is none (a CPU build, no driver, none
# visible): a problem that builds its model or inputs on CUDA cannot be checked here
_NO_CUDA = (
    "Torch not compiled with CUDA enabled",
    "No CUDA GPUs are available",
    "Found no NVIDIA driver",
    "CUDA driver initialization failed",
)
NEEDS_CUDA_NOTE = (
    "it builds its model or inputs on CUDA, which this CPU-only check cannot do: "
    "imported here, its inputs are checked on the GPU"
)


def _chain(exc: BaseException) -> Iterator[BaseException]:
    """``exc`` and what caused it, outermost first."""
    seen: BaseException | None = exc
    while seen is not None:
        yield seen
        seen = seen.__cause__ or seen.__context__


def _needs_cuda(exc: BaseException) -> bool:
    """Whether ``exc`` (or what caused it) is torch refusing CUDA on this CPU-only check."""
    return any(text in str(seen) for seen in _chain(exc) for text in _NO_CUDA)


class _NeedsCuda(Exception):
    """The problem is importable but makes CUDA tensors: the rest is checked on the GPU."""


class _Found(Exception):
    """A problem found in the child: where (file:line) and why."""

    def __init__(self, where: str, cause: str) -> None:
        super().__init__(f"{where}: {cause}")
        self.where, self.cause = where, cause


def _where(path: Path, exc: BaseException) -> str:
    """``path:line`` of the deepest frame in ``path`` behind ``exc`` (its cause chain too)."""
    target = str(path.resolve())
    line = None
    for seen in _chain(exc):
        if (
            isinstance(seen, SyntaxError)
            and seen.filename
            and Path(seen.filename).resolve() == Path(target)
        ):
            line = seen.lineno
        for frame in traceback.extract_tb(seen.__traceback__):
            if frame.filename and str(Path(frame.filename).resolve()) == target:
                line = frame.lineno
        if line is not None:
            break
    return f"{path}:{line}" if line else str(path)


def _cause(exc: BaseException, path: Path | None = None) -> str:
    text = exc.reason if isinstance(exc, ProblemError) else f"{type(exc).__name__}: {exc}"
    return " ".join(str(text).split())[:400] + _sibling_hint(exc, path)


def _sibling_hint(exc: BaseException, path: Path | None) -> str:
    """A module the file imports from its own folder: the file travels alone, so say so."""
    seen = next((e for e in _chain(exc) if isinstance(e, ModuleNotFoundError)), None)
    if path is None or seen is None or not seen.name:
        return ""
    top = seen.name.split(".")[0]
    folder = path.resolve().parent
    if not ((folder / f"{top}.py").is_file() or (folder / top / "__init__.py").is_file()):
        return ""
    return (
        f" ('{top}' sits beside the file, but a problem or candidate travels as one file: "
        "put what it needs into the file, or install the module on every worker)"
    )


def _bind(fn: Any, inputs: list[Any], what: str, path: Path) -> None:
    """The inputs fit ``fn``'s parameters (checked without calling it)."""
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):
        return  # a builtin or C function: nothing to check without calling it
    try:
        signature.bind(*inputs)
    except TypeError as exc:
        line = getattr(getattr(fn, "__code__", None), "co_firstlineno", None)
        where = f"{path}:{line}" if line else str(path)
        raise _Found(
            where,
            f"{what}{signature} does not take the {len(inputs)} input(s) of get_inputs(): {exc}",
        ) from exc


def check_problem(path: Path, one_shape: bool = False) -> list[Any]:
    """Import, build and make inputs for the problem at ``path``; returns its init inputs.
    ``one_shape``: its inputs must also keep their shapes under the gates' other seeds, as
    one compiled forward needs (the compile step refuses it otherwise, after the wait)."""
    from kernelopt.kinds.registry import load_problem
    from kernelopt.loaded_problem import seed_dependent_inputs

    try:
        loaded = load_problem(path)
        model = loaded.make_model(0, device="cpu")
        inputs = loaded.make_inputs(0, device="cpu")
        init = loaded.make_init_inputs(0)
        varying = one_shape and seed_dependent_inputs(
            lambda s: inputs if s == 0 else loaded.make_inputs(s, device="cpu")
        )
    except Exception as exc:
        if _needs_cuda(exc):
            raise _NeedsCuda(NEEDS_CUDA_NOTE) from exc
        raise _Found(_where(path, exc), _cause(exc, path)) from exc
    if varying:
        raise _Found(str(path), varying)
    _bind(model.forward, inputs, f"{type(model).__name__}.forward", path)
    return init


def import_candidate(candidate: Path) -> Any:
    """The candidate file imported as a module (its own import errors named by line)."""
    from kernelopt.pyfile import exec_file

    try:
        return exec_file(candidate, "kernelopt_preflight_candidate")
    except Exception as exc:
        raise _Found(_where(candidate, exc), f"importing failed: {_cause(exc, candidate)}") from exc


def check_candidate(problem: Path, candidate: Path) -> None:
    """Import the candidate; build ``ModelNew`` from the problem's init inputs, bind inputs."""
    from kernelopt.kinds.registry import load_problem

    loaded = load_problem(problem)
    init, inputs = loaded.make_init_inputs(0), loaded.make_inputs(0, device="cpu")
    module = import_candidate(candidate)
    model_new = getattr(module, "ModelNew", None)
    if model_new is None:
        launch = getattr(module, "launch", None)
        if callable(launch):
            _bind(launch, inputs, "launch", candidate)
        return
    try:
        model = model_new(*init)
    except Exception as exc:
        raise _Found(
            _where(candidate, exc), f"ModelNew(*get_init_inputs()) failed: {_cause(exc)}"
        ) from exc
    _bind(model.forward, inputs, "ModelNew.forward", candidate)


def _stuck_at(stderr: str, files: list[Path]) -> str | None:
    """``file:line`` of the user's file in a faulthandler dump (the innermost frame), if any."""
    import re

    if "Timeout" not in stderr:
        return None
    for file in files:
        target = str(file.resolve())
        # faulthandler prints the innermost frame first
        for name, line in re.findall(r'File "([^"]+)", line (\d+)', stderr):
            if str(Path(name).resolve()) == target:
                return f"{file}:{line}"
    return None


def _child(argv: list[str]) -> dict[str, Any]:
    import faulthandler

    limit = float(os.environ.get(SECONDS_ENV) or DEFAULT_SECONDS)
    # before the parent's kill: say where the user's code hangs, then exit
    faulthandler.dump_traceback_later(max(limit - 2.0, 1.0), exit=True)
    one_shape = argv[:1] == [ONE_SHAPE_FLAG]
    argv = argv[1:] if one_shape else argv
    problem = Path(argv[0])
    try:
        check_problem(problem, one_shape)
        if len(argv) > 1:
            check_candidate(problem, Path(argv[1]))
    except _Found as found:
        return {"ok": False, "where": found.where, "cause": found.cause}
    except _NeedsCuda as needs:
        if len(argv) > 1:  # the candidate still imports, or it is named now
            try:
                import_candidate(Path(argv[1]))
            except _Found as found:
                return {"ok": False, "where": found.where, "cause": found.cause}
        return {"ok": True, "note": str(needs)}
    return {"ok": True}


def preflight(
    problem: str | Path,
    candidate: str | Path | None = None,
    seconds: float | None = None,
    *,
    confine: Confine | None = None,
    one_shape: bool = False,
) -> str:
    """Check the files in a CPU-only child; ``ProblemError`` naming file, line and cause.
    ``one_shape`` (for a campaign, which compiles the forward for one shape): the
    problem's inputs keep their shapes and plain values under every gate seed.

    Returns what could not be checked here ("" when everything was): a problem that makes
    CUDA tensors is only imported, and its inputs are checked where the GPU is.  With a
    ``candidate`` the child runs only ``confine``d: its import runs the candidate's code
    before any gate or cache-guard window, so it could otherwise rewrite the gates' own
    files or the compiler caches, or leave a process behind.
    """
    if candidate is not None and confine is None:
        raise TypeError("a candidate is untrusted code: preflight imports it only confined")
    if seconds is None:
        seconds = float(os.environ.get(SECONDS_ENV) or DEFAULT_SECONDS)
    given = [str(problem)] + ([str(candidate)] if candidate is not None else [])
    files = [Path(name).resolve() for name in given]  # the child runs elsewhere
    args = [str(f) for f in files]
    # the CPU only: nothing touches a GPU; the child's watchdog fires before our kill
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "", SECONDS_ENV: str(seconds)}
    argv = [sys.executable, "-P", "-m", "kernelopt.preflight_problem"]
    argv += [ONE_SHAPE_FLAG, *args] if one_shape else args
    if confine is not None:
        argv, env = confine(argv, env, files)
    try:
        done = subprocess.run(
            argv,
            capture_output=True,
            text=True,
            timeout=seconds,
            env=env,
            stdin=subprocess.DEVNULL,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        raise ProblemError(
            str(candidate or problem) if candidate else str(problem),
            f"importing and building it did not finish within {seconds:.0f} s "
            f"(a loop or a blocking call at import or in get_inputs()?; {SECONDS_ENV} "
            "sets the limit)",
        ) from exc
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    try:
        verdict = json.loads(lines[-1])
    except (IndexError, json.JSONDecodeError):
        stuck = _stuck_at(done.stderr, files)
        if stuck:  # the child's own watchdog dumped where it hung
            raise ProblemError(
                _as_given(stuck, files, given),
                f"did not finish importing and building within {seconds:.0f} s: it hangs here",
            ) from None
        tail = " ".join(done.stderr.strip().splitlines()[-1:]) or f"exit code {done.returncode}"
        raise ProblemError(
            str(problem), f"checking it crashed the checking process: {tail}"
        ) from None
    if not verdict.get("ok"):
        raise ProblemError(_as_given(verdict["where"], files, given), verdict["cause"])
    return str(verdict.get("note", ""))


def _as_given(where: str, files: list[Path], given: list[str]) -> str:
    """``where`` (``file:line``) with the file named as the user gave it, not resolved."""
    for full, name in zip(files, given, strict=True):
        if where == str(full) or where.startswith(f"{full}:"):
            return name + where[len(str(full)) :]
    return where


if __name__ == "__main__":
    print(json.dumps(_child(sys.argv[1:])), flush=True)
