"""The compile step for a kernel problem: validate it, pick its baseline, capture it like Inductor's.

For a module problem the compile step captures Inductor's wrapper.  A kernel
problem has nothing to compile -- its baseline is the user's own kernel -- but
later steps expect the same ``CompileResult``, so this produces one:

* ``wrapper``: a small module (``WRAPPER``) whose ``make_call`` runs the
  baseline ``ModelNew`` (the problem's source plus the shim of
  ``kernelopt.kinds.baseline``) through ``ForwardRunner``, exactly like a
  re-stitched single-kernel candidate, and whose ``call(args)`` does the same
  for steps that run a wrapper's ``call`` (triage).  It defines no Inductor
  kernel, so segmentation picks single-kernel mode with one ``forward``
  target: candidates are ``ModelNew`` modules, as for KernelBench level 1;
* ``args`` = ``inputs`` = ``get_inputs()`` drawn from the problem's seed (all
  with role ``input``: there are no weights);
* ``eager_ms`` times ``reference(*inputs)`` (the eager role),
  ``compiled_ms`` and ``wrapper_ms`` the baseline kernel;
* ``mode`` names the baseline (``triton-launcher`` or
  ``helion-autotuned:<effort>``) and ``mode_reason`` says how it was chosen,
  Helion's autotuning budget included.

Before any timing, the runtime checks of ``kernelopt.kinds.validate`` run on
the target device; a failure is a ``ProblemError`` (never retried).
Results are cached by content hash like Inductor captures.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable
from typing import Any

from kernelopt.checkpoint import report
from kernelopt.compile.tensors import clone_exact, tensor_spec
from kernelopt.compile.toolchain import toolchain_fields
from kernelopt.compile.versions import versions
from kernelopt.contracts.compiled import CompileInput, CompileResult
from kernelopt.contracts.problem import ProblemKind
from kernelopt.errors import ProblemError
from kernelopt.loaded_problem import KernelProblem
from kernelopt.log import get_logger
from kernelopt.store import ArtifactStore

log = get_logger(__name__)

TRITON_MODE = "triton-launcher"
HELION_MODE = "helion-autotuned"

WRAPPER = '''"""kernelopt baseline of a {kind} kernel problem: {how}

Not an Inductor wrapper: the problem's own launcher as a single-kernel-mode
forward (see kernelopt.kinds).  make_call() is what the gates and re-stitching
use; call(args) runs the same thing for steps that call a wrapper directly.
"""

from kernelopt.compile.runtime import ForwardRunner as _KoForwardRunner

KERNELOPT_FORWARD = True
KERNELOPT_KIND = {kind!r}
CANDIDATE_SOURCE = {source!r}
ARG_NAMES = {names!r}
ARG_ROLES = {roles!r}
SEED = {seed!r}
_ko_calls = {{}}


def make_call(init_inputs, device="cuda"):
    runner = _KoForwardRunner(CANDIDATE_SOURCE, ARG_NAMES, ARG_ROLES, SEED, init_inputs, device)
    return runner.call


def call(args):
    device = next((str(a.device) for a in args if hasattr(a, "device")), "cuda")
    if device not in _ko_calls:
        _ko_calls[device] = make_call([], device)
    return _ko_calls[device](args)
'''


def baseline_model_source(wrapper: str) -> str:
    """The baseline ``ModelNew`` source a ``WRAPPER`` text runs (its ``CANDIDATE_SOURCE``),
    read without running the wrapper."""
    import ast

    for node in ast.parse(wrapper).body:
        if (
            isinstance(node, ast.Assign)
            and [getattr(t, "id", None) for t in node.targets] == ["CANDIDATE_SOURCE"]
            and isinstance(node.value, ast.Constant)
            and isinstance(node.value.value, str)
        ):
            return node.value.value
    raise ValueError("not a kernel problem's baseline wrapper: no CANDIDATE_SOURCE string")


def baseline_mode(problem: KernelProblem, device: str) -> str:
    if problem.kind == ProblemKind.HELION:
        from kernelopt.kinds.helion_kernels import effort_for

        return f"{HELION_MODE}:{effort_for(problem, device)}"
    return TRITON_MODE


def wrapper_text(
    problem: KernelProblem, candidate_source: str, how: str, n_args: int, seed: int
) -> str:
    return WRAPPER.format(
        kind=problem.kind.value,
        how=how.replace('"""', "'''"),
        source=candidate_source,
        names=[f"input:{i}" for i in range(n_args)],
        roles=["input"] * n_args,
        seed=seed,
    )


def _clone(values: list[Any]) -> list[Any]:
    return [clone_exact(v) for v in values]


def compile_kernel_problem(
    inp: CompileInput,
    problem: KernelProblem,
    store: ArtifactStore,
    device: str,
    bench: Callable[[Callable[[], Any]], float],
) -> CompileResult:
    """The compile step of a loaded Triton / Helion problem (same result model as modules)."""
    import torch

    from kernelopt.compile import cache
    from kernelopt.compile.runtime import save_tensors, wrapper_call
    from kernelopt.compile.tensors import exact_match_and_max_diff
    from kernelopt.kinds import validate
    from kernelopt.kinds.baseline import baseline_source
    from kernelopt.kinds.modules import import_source

    source = problem.source
    name, seed = inp.problem.name, inp.problem.seed
    ver = versions()
    mode = baseline_mode(problem, device)
    key_mode = mode
    if problem.kind == ProblemKind.HELION:
        from kernelopt.kinds.helion_kernels import helion_version

        key_mode += f"|helion {helion_version()}"
    key = cache.cache_key(
        hashlib.sha256(source.encode()).hexdigest(),
        seed,
        key_mode,
        ver["torch"],
        ver["triton"],
        ver["gpu"],
        False,
    )
    if inp.use_cache:
        hit = cache.lookup(key, store)
        if hit is not None:
            log.info("compile cache hit", problem=name, kind=problem.kind.value, key=key[:12])
            return hit

    report({"step": "validate", "kind": problem.kind.value})
    validate.check_fits(problem, device, seed)
    validate.check_inputs_reproducible(problem, seed)
    inputs = problem.inputs(seed, device)
    pristine = _clone(inputs)
    reference_out = validate.check_reference_deterministic(problem, device, seed, inputs)

    report({"step": "baseline", "mode": mode})
    started = time.monotonic()
    candidate_source, how = baseline_source(problem, device, seed)
    choose_seconds = time.monotonic() - started
    model = import_source(candidate_source, f"baseline_{name}", problem.path).ModelNew().to(device)
    with torch.no_grad():
        baseline_out = validate.leaves(model(*_clone(inputs)))
    wrong = validate.baseline_error(problem, baseline_out, reference_out)
    if wrong:
        raise ProblemError(
            problem.path,
            f"the file's own kernel does not compute its reference ({wrong}); every candidate "
            "is held to that tolerance, so fix the kernel or the reference first",
        )

    numerics = validate.baseline_rho(problem, _clone(pristine), baseline_out)
    n = len(pristine)
    wrapper_ref = store.put_text(
        wrapper_text(problem, candidate_source, how, n, seed),
        media_type="text/x-python",
        name=f"{name}_wrapper.py",
    )
    result = CompileResult(
        problem=inp.problem.model_copy(update={"kind": problem.kind}),
        cache_key=key,
        mode=mode,
        wrapper=wrapper_ref,
        args=save_tensors(store, pristine, f"{name}_args.pt"),
        inputs=save_tensors(store, pristine, f"{name}_inputs.pt"),
        init_inputs=save_tensors(store, [], f"{name}_init_inputs.pt"),
        eager_ms=0.0,
        compiled_ms=0.0,
        compile_seconds=choose_seconds,
        arg_roles=["input"] * n,
        arg_names=[f"input:{i}" for i in range(n)],
        arg_input_index=list(range(n)),
        arg_specs=[tensor_spec(v) for v in pristine],
        num_outputs=len(baseline_out),
        mode_reason=f"{problem.kind.value} kernel problem: the baseline is {how}; {numerics}",
        **toolchain_fields(ver),
    )

    report({"step": "reference"})
    call = wrapper_call(result, store, None, device)
    wrapper_out = list(call(_clone(pristine)))
    matches, max_diff = exact_match_and_max_diff(wrapper_out, baseline_out)

    report({"step": "timing"})
    bench_args = _clone(pristine)
    with torch.no_grad():
        eager_ms = bench(lambda: problem.reference(*inputs))
        compiled_ms = bench(lambda: model(*inputs))
        wrapper_ms = bench(lambda: call(list(bench_args)))
    result = result.model_copy(
        update={
            "reference_output": save_tensors(store, wrapper_out, f"{name}_reference_out.pt"),
            "eager_ms": eager_ms,
            "compiled_ms": compiled_ms,
            "wrapper_ms": wrapper_ms,
            "wrapper_matches_compiled": matches,
            "wrapper_max_abs_diff": max_diff,
        }
    )
    cache.save(result)
    log.info(
        "kernel problem compiled",
        problem=name,
        kind=problem.kind.value,
        mode=mode,
        eager_ms=round(eager_ms, 4),
        baseline_ms=round(compiled_ms, 4),
        wrapper_matches=matches,
    )
    return result
