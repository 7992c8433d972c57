"""What a compile result was compiled with: the versions and the numerics policy it records.

Every compile step (an Inductor capture, a kernel problem's baseline) stores the same
fields from ``versions()``, so they are named in one place.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kernelopt.precision import POLICY


def toolchain_fields(ver: Mapping[str, str]) -> dict[str, Any]:
    """``CompileResult`` keyword arguments for the toolchain ``ver`` (from ``versions()``)."""
    return {
        "torch_version": ver["torch"],
        "triton_version": ver["triton"],
        "gpu_name": ver["gpu"],
        "python_version": ver["python"],
        "numerics": POLICY,
    }


__all__ = ["toolchain_fields"]
