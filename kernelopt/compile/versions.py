"""The software and GPU a baseline was compiled with: part of every compile-cache key.

Its own module so the module-problem compile (``capture``) and the kernel-problem
compile (``kernelopt.kinds.compile``) share it without importing each other.
"""

from __future__ import annotations

import platform


def versions() -> dict[str, str]:
    """torch, triton, python and the first GPU's name ("cpu" without one)."""
    import torch
    import triton

    gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu"
    return {
        "torch": torch.__version__,
        "triton": triton.__version__,
        "gpu": gpu,
        "python": platform.python_version(),
    }


__all__ = ["versions"]
