"""The bytes a target must move, and how much faster the bandwidth lets it get.

Pure arithmetic on contracts, shared by triage (which ranks targets by it) and
the prompt facts (which state it), so both say the same number.  The floor is
every tensor argument read or written once at the device's bandwidth: a kernel
already near it cannot get much faster without moving fewer bytes.
"""

from __future__ import annotations

from .compiled import CompileResult, KernelArg, SearchTarget, SegmentResult, TargetKind, TensorSpec

DTYPE_BYTES = {
    "float64": 8,
    "int64": 8,
    "complex64": 8,
    "float32": 4,
    "int32": 4,
    "float16": 2,
    "bfloat16": 2,
    "int16": 2,
    "int8": 1,
    "uint8": 1,
    "bool": 1,
}


def tensor_bytes(spec: TensorSpec) -> int:
    """Bytes a tensor's storage spans (a stride-0 broadcast counts once)."""
    size = DTYPE_BYTES.get(spec.dtype.removeprefix("torch."), 4)
    if any(n == 0 for n in spec.shape):
        return 0
    span = 1 + sum((n - 1) * abs(s) for n, s in zip(spec.shape, spec.stride, strict=False))
    return span * size


def signature_bytes(signature: list[KernelArg]) -> tuple[int, int]:
    """(bytes read, bytes written) if every tensor crosses HBM once: the data-movement floor."""
    read = written = 0
    for arg in signature:
        if arg.tensor is None:
            continue
        n = tensor_bytes(arg.tensor)
        if arg.role in ("in", "inout", ""):
            read += n
        if arg.role in ("out", "inout"):
            written += n
    return read, written


def forward_outputs(segment: SegmentResult) -> list[KernelArg]:
    """Kernel outputs no later launch reads: the forward's outputs as far as Triton writes them."""
    read_later: set[str] = set()
    outputs: dict[str, KernelArg] = {}
    for kernel in reversed(segment.kernels):
        args = kernel.launches[0].args if kernel.launches else kernel.args
        for arg in args:
            if arg.role in ("out", "inout") and arg.expr not in read_later:
                outputs.setdefault(arg.expr, arg)
        read_later.update(a.expr for a in args if a.role in ("in", "inout"))
    return list(outputs.values())


def target_bytes(
    compiled: CompileResult, segment: SegmentResult, target: SearchTarget
) -> tuple[int, int]:
    """(bytes read, bytes written) of the target's floor.

    A kernel or fusion group: its signature's tensors once each.  The whole
    forward: its inputs and the module's parameters read once, the Triton
    kernels' final outputs written once (intermediates need not touch HBM).
    """
    if target.kind != TargetKind.FORWARD:
        return signature_bytes(target.signature)
    read, _ = signature_bytes(target.signature)
    params = sum(
        tensor_bytes(spec)
        for role, spec in zip(compiled.arg_roles, compiled.arg_specs, strict=False)
        if role != "input"
    )
    _, written = signature_bytes(forward_outputs(segment))
    return read + params, written


def required_speedup(share: float, gamma: float) -> float | None:
    """Amdahl: the target speedup S with 1 / ((1 - share) + share / S) = gamma; None if unreachable."""
    if share <= 0.0:
        return None
    denominator = 1.0 / gamma - (1.0 - share)
    if denominator <= 0.0:
        return None
    return share / denominator


def peak_bandwidth_gbs(memory_clock_khz: int | None, bus_width_bits: int | None) -> float | None:
    """Peak DRAM bandwidth: 2 transfers per clock (DDR) x bus width, in GB/s."""
    if not memory_clock_khz or not bus_width_bits:
        return None
    return 2.0 * memory_clock_khz * 1e3 * (bus_width_bits / 8) / 1e9


def device_bandwidth_gbs(props: object) -> float | None:
    """Peak DRAM bandwidth of a CUDA device from its properties (``torch.cuda``'s
    ``get_device_properties``); None where this torch does not report clock or bus width."""
    return peak_bandwidth_gbs(
        getattr(props, "memory_clock_rate", None), getattr(props, "memory_bus_width", None)
    )


def floor_ms(nbytes: int, bandwidth_gbs: float) -> float:
    """Milliseconds to move ``nbytes`` at ``bandwidth_gbs``."""
    return nbytes / (bandwidth_gbs * 1e9) * 1e3


def bandwidth_headroom(ms: float | None, nbytes: int, bandwidth_gbs: float | None) -> float | None:
    """How many times faster than ``ms`` the bytes-moved floor is; None when either is unknown."""
    if not ms or nbytes <= 0 or not bandwidth_gbs:
        return None
    return ms / floor_ms(nbytes, bandwidth_gbs)


def short_of_headroom(headroom: float | None, required: float | None) -> bool:
    """True when bandwidth alone cannot give the target the speedup the forward needs of it.

    Unknown headroom says nothing, and neither does an unreachable requirement (a
    target too small to reach gamma alone): only a measured shortfall counts.
    """
    return headroom is not None and required is not None and headroom < required


def headroom_reason(headroom: float, required: float, gamma: float) -> str:
    """A shortfall in words: the headroom, the bandwidth used, and what would be needed."""
    return (
        f"bandwidth headroom {headroom:.2f}x ({1 / headroom:.0%} of peak) < required "
        f"{required:.3f}x: cannot reach gamma = {gamma} without moving fewer bytes"
    )


__all__ = [
    "DTYPE_BYTES",
    "bandwidth_headroom",
    "device_bandwidth_gbs",
    "floor_ms",
    "forward_outputs",
    "headroom_reason",
    "peak_bandwidth_gbs",
    "required_speedup",
    "short_of_headroom",
    "signature_bytes",
    "target_bytes",
    "tensor_bytes",
]
