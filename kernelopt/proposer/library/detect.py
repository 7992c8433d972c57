"""Which library calls a compiled forward makes, read from the wrapper's extern calls.

The segment step already lists every ``extern_kernels.*`` / ``aten.*`` call of
Inductor's wrapper (``SegmentResult.library_calls``); the callee, not the
problem, says whether cuDNN convolutions or cuBLAS GEMMs run, so the family
applies exactly where those libraries are in the forward.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from kernelopt.contracts.compiled import LibraryCall

_CONV = ("convolution", "conv2d", "conv3d", "conv_transpose", "cudnn_convolution")
_MATMUL = {"mm", "addmm", "bmm", "baddbmm", "matmul", "linear", "_addmm_activation", "addmv"}


@dataclass(frozen=True)
class LibraryUse:
    """The library calls of one forward, by library family."""

    conv: int = 0
    matmul: int = 0

    @property
    def any(self) -> bool:
        return bool(self.conv or self.matmul)


def callee(name: str) -> str:
    """``extern_kernels.convolution`` -> ``convolution``; overloads dropped (``mm.default``)."""
    parts = [p for p in name.split(".") if p not in ("default", "out", "Tensor")]
    return parts[-1] if parts else name


def library_use(calls: Iterable[LibraryCall]) -> LibraryUse:
    """How many convolution and matmul library calls the wrapper makes."""
    conv = matmul = 0
    for call in calls:
        name = callee(call.name)
        if any(name.startswith(c) or name.endswith(c) for c in _CONV):
            conv += 1
        elif name in _MATMUL:
            matmul += 1
    return LibraryUse(conv=conv, matmul=matmul)
