"""The Inductor options a compile mode stands for, and the rules the product adds to them."""

from __future__ import annotations

from typing import Any

from kernelopt.errors import DeterministicError


class UnknownModeError(DeterministicError):
    """``torch.compile`` knows no such mode."""


# Added to any mode that autotunes GEMM/conv templates, where the installed torch has it
# (docs/architecture.md, "Compile rules"):
# * template configs that ask for more shared memory than the GPU has cannot run, and
#   pruning them before they compile keeps autotuning from spending its time on them;
# * one compile thread keeps Inductor's worker pool out of the compile: once that pool is
#   warm, a template's choices are handed to it and then built again, one at a time,
#   inside benchmarking, while without it they are built by threads of this process.
AUTOTUNE_RULES: dict[str, Any] = {
    "max_autotune_prune_choices_based_on_shared_mem": True,
    "compile_threads": 1,
}


def mode_options(mode: str) -> dict[str, Any]:
    """The Inductor config patches of ``torch.compile(mode=...)``, plus the product's rules.

    The rules change which choices are tried, never which numerics run, and the
    compile records them (``CompileResult.inductor_options``) so a deployment can
    compile the same way.
    """
    from torch._inductor import config, list_mode_options

    if mode in ("", "default"):
        return {}
    try:
        patches = dict(list_mode_options(mode))
    except RuntimeError as exc:
        raise UnknownModeError(str(exc)) from exc
    if patches.get("max_autotune") or patches.get("max_autotune_gemm"):
        patches |= {k: v for k, v in AUTOTUNE_RULES.items() if hasattr(config, k)}
    return patches
