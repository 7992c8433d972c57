"""Build the callable a child runs from a ``ModelSource`` (inside the child only)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from gates.call_policy import apply_mode, load_policy
from gates.problem_io import ProblemFile, load_candidate_class
from gates.protocol import ModelSource
from kernelopt.compile.modes import mode_options

WEIGHTS_FILE = "_weights.pt"


def weights_path(inputs_dir: str) -> Path:
    return Path(inputs_dir) / WEIGHTS_FILE


def load_matching_weights(model: torch.nn.Module, inputs_dir: str) -> tuple[str, str]:
    """Copy Model's state dict into ``model`` when names and shapes match.

    Returns ``("state_dict", "")`` or ``("seed", why not)``: with different
    names the two sides only share the construction seed, which is enough
    when ModelNew creates the same parameters in the same order.
    """
    path = weights_path(inputs_dir)
    if not path.is_file():
        return "seed", "no reference weights file"
    ref_state: dict[str, torch.Tensor] = torch.load(path, weights_only=True)
    own = model.state_dict()
    if not ref_state and not own:
        return "state_dict", "no parameters"
    if set(ref_state) != set(own):
        missing = sorted(set(ref_state) - set(own))[:5]
        extra = sorted(set(own) - set(ref_state))[:5]
        return "seed", f"parameter names differ (Model only: {missing}, ModelNew only: {extra})"
    for key, value in ref_state.items():
        if own[key].shape != value.shape:
            return (
                "seed",
                f"parameter {key} has shape {list(own[key].shape)}, Model's {list(value.shape)}",
            )
    model.load_state_dict(ref_state)
    return "state_dict", ""


def _no_phase(phase: str, **_: object) -> None:
    return None


def build_callable(
    src: ModelSource,
    device: str,
    model_seed: int,
    inputs_dir: str,
    on_phase: Callable[..., None] = _no_phase,
) -> tuple[Callable[..., Any], dict[str, str]]:
    """Return ``(fn, info)``; ``fn(*inputs)`` runs one forward pass.

    ``on_phase`` marks "import" (candidate module import: syntax errors,
    import-time failures) and "build" (construction, weight copy).  Every
    model gets the reference's evaluation mode (``gates.call_policy``); the
    caller prepares each call with a ``CallPreparer``.
    """
    policy = load_policy(inputs_dir)
    if src.kind == "wrapper":
        on_phase("build")
        return _build_wrapper(src, device)
    problem = ProblemFile(src.problem_path)
    if src.kind == "candidate":
        on_phase("import")
        cls = load_candidate_class(src.candidate_path)
        on_phase("build")
        model = problem.build(cls, model_seed, device)
        how, note = load_matching_weights(model, inputs_dir)
        apply_mode(model, policy)
        return model, {"weights": how, "weights_note": note, "mode": policy.mode}
    on_phase("build")
    baseline = problem.baseline(model_seed, device)  # the kind's own baseline, if it has one
    if baseline is not None:  # their baseline is their own kernel, whatever the compile mode
        return baseline, {"weights": "none", "baseline": "kernel problem's own launcher"}
    model = problem.build(problem.Model, model_seed, device)
    apply_mode(model, policy)
    if src.kind == "compiled":
        if policy.random:  # Inductor's own RNG draws other numbers than eager's seeded one
            import torch._inductor.config as inductor_config

            inductor_config.fallback_random = True
        # the mode plus the product's compile rules, as the compile step compiles it
        mode = src.compile_mode or "default"
        compiled = torch.compile(model, options=mode_options(mode))
        return compiled, {"weights": "state_dict", "compile_mode": mode}
    return model, {"weights": "state_dict"}


def _build_wrapper(src: ModelSource, device: str) -> tuple[Callable[..., Any], dict[str, str]]:
    """A (re-stitched) Inductor wrapper with captured weights, via the compile package."""
    from kernelopt.compile.runtime import wrapper_forward  # the compile helper's module
    from kernelopt.contracts import ArtifactRef, CompileResult
    from kernelopt.store import open_store

    store = open_store(Path(src.store_root) if src.store_root else None)
    compiled = CompileResult.model_validate_json(Path(src.compiled_json).read_text())
    wrapper = (
        ArtifactRef.model_validate_json(Path(src.wrapper_json).read_text())
        if src.wrapper_json
        else None
    )
    fn = wrapper_forward(compiled, store, wrapper, device)
    return fn, {"weights": "captured", "wrapper": wrapper.short if wrapper else "original"}
