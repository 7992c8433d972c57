"""Rebuild a compiled baseline from its wrapper text and argument map, without compiling.

A ``CompileResult`` names every flat argument (``param:fc.weight``,
``buffer:shift``, ``input:0``) and weights and inputs are drawn from the
problem's seed, so the exact captured argument list can be regenerated from
the problem file alone.  With the captured wrapper text this gives a baseline
that runs again without a 30-50 s max-autotune compile: GPU tests use it on
the committed fixtures, and a store that lost an args blob can be repaired.
Shapes and strides are checked against the recorded ``arg_specs``; a problem
file that changed since capture is refused (its source hash differs).
"""

from __future__ import annotations

import hashlib
from typing import Any

from kernelopt.compile.runtime import chosen_configs, load_wrapper_module, run_call, save_tensors
from kernelopt.compile.wrapper_parse import parse_wrapper
from kernelopt.contracts.compiled import CompileResult
from kernelopt.errors import DeterministicError
from kernelopt.precision import strict_fp32
from kernelopt.problem import LoadedProblem, load_module_problem
from kernelopt.store import ArtifactStore


class RehydrateError(DeterministicError):
    """The recorded baseline does not fit the problem as it is now."""


def _lookup(name: str, model: Any, inputs: list[Any]) -> Any:
    kind, _, key = name.partition(":")
    if kind == "input":
        return inputs[int(key)]
    if kind == "param":
        return dict(model.named_parameters(remove_duplicate=False))[key]
    if kind == "buffer":
        return dict(model.named_buffers(remove_duplicate=False))[key]
    if kind == "attr":
        value = model
        for part in key.split("."):
            value = getattr(value, part)
        return value
    raise RehydrateError(f"argument {name} cannot be regenerated from the problem")


def flat_args(compiled: CompileResult, model: Any, inputs: list[Any]) -> list[Any]:
    """The wrapper's flat argument list for this model and these inputs, by recorded name."""
    from kernelopt.compile.capture import clone_exact

    out = []
    for i, name in enumerate(compiled.arg_names):
        try:
            value = _lookup(name, model, inputs)
        except (KeyError, IndexError, AttributeError, ValueError) as exc:
            raise RehydrateError(f"argument {name} not found: {exc}") from exc
        spec = compiled.arg_specs[i] if i < len(compiled.arg_specs) else None
        if spec is not None and (
            list(value.shape) != spec.shape or list(value.stride()) != spec.stride
        ):
            raise RehydrateError(
                f"argument {name}: shape/stride {list(value.shape)}/{list(value.stride())} "
                f"!= recorded {spec.shape}/{spec.stride}"
            )
        out.append(clone_exact(value))
    return out


def drawn_from_seed(
    recorded: CompileResult, problem_source: str, device: str
) -> tuple[LoadedProblem, list[Any], list[Any]]:
    """The problem, its inputs and the wrapper's flat arguments, drawn again from the compile's seed.

    Rehydrating a cached wrapper and re-drawing a thin home's left-out tensors
    must draw exactly what the compile drew, so both come through here.
    """
    problem = load_module_problem(problem_source, name=recorded.problem.name)
    seed = recorded.problem.seed
    model = problem.make_model(seed, device)
    inputs = problem.make_inputs(seed, device)
    return problem, inputs, flat_args(recorded, model, inputs)


def rehydrate(
    recorded: CompileResult,
    problem_source: str,
    wrapper_source: str,
    store: ArtifactStore,
    device: str = "cuda",
) -> CompileResult:
    """A runnable CompileResult (fresh artifacts, reference output recomputed)."""
    digest = hashlib.sha256(problem_source.encode("utf-8")).hexdigest()
    if digest != recorded.problem.source.sha256:
        raise RehydrateError(
            f"{recorded.problem.name}: the problem source changed since the wrapper was captured"
        )
    name = recorded.problem.name
    problem, inputs, args = drawn_from_seed(recorded, problem_source, device)
    wrapper_ref = store.put_text(
        wrapper_source, media_type="text/x-python", name=f"{name}_wrapper.py"
    )
    if wrapper_ref.sha256 != recorded.wrapper.sha256:
        raise RehydrateError(f"{name}: wrapper text differs from the recorded one")
    module = load_wrapper_module(wrapper_source, f"{name}_rehydrated")
    from kernelopt.compile.capture import clone_exact

    # the reference under the numerics the re-stitch and the gates run: at PyTorch's
    # default cuDNN may use TF32, and an identity re-stitch would differ from it
    strict_fp32()
    reference = run_call(module, [clone_exact(a) for a in args])
    configs = chosen_configs(
        module, list(recorded.kernel_configs or parse_wrapper(wrapper_source).kernels)
    )
    source_ref = store.put_text(problem_source, media_type="text/x-python", name=f"{name}.py")
    return recorded.model_copy(
        update={
            "problem": recorded.problem.model_copy(update={"source": source_ref}),
            "cache_hit": False,
            "wrapper": wrapper_ref,
            "args": save_tensors(store, args, f"{name}_args.pt"),
            "inputs": save_tensors(store, inputs, f"{name}_inputs.pt"),
            "init_inputs": save_tensors(
                store, problem.make_init_inputs(recorded.problem.seed), f"{name}_init.pt"
            ),
            "reference_output": save_tensors(store, reference, f"{name}_reference_out.pt"),
            "default_mode_wrapper": None,
            "kernel_configs": configs,
        }
    )
