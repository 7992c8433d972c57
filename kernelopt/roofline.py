"""Physical floors: how fast a forward pass *can* be on a given GPU.

A blanket "speedup > 100x is a cheat" rule rejects real algebraic wins
(diag(a) @ B as a row scale is ~70x on an H200, and correct).  The physics
that no kernel escapes is data movement: after ``do_bench`` flushes L2, every
input (and every weight) must be read from HBM at least once, and output bytes
beyond what L2 can absorb must be written.  A candidate timed faster than that
floor (with slack) is not accepted: it is quarantined for re-timing.

FLOPs are different: an algebraic rewrite legitimately does fewer FLOPs than
the reference (diag @ B: O(N^2) instead of O(N^3)), so the reference's FLOP
count cannot bound the candidate.  It is recorded (with the fp32 / tf32 peak
floors) as evidence: beating the fp32 FLOP floor means either an algebraic
rewrite or reduced precision, and V_model has already ruled out the latter.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from kernelopt.contracts import data_movement


@dataclass(frozen=True)
class DeviceCeilings:
    name: str
    copy_bandwidth_gbs: float  # measured device-to-device copy, bytes read + written
    fp32_tflops: float  # non-tensor-core fp32 peak
    tf32_tflops: float  # dense tf32 tensor-core peak
    l2_bytes: int
    measured: bool = False  # True when copy_bandwidth_gbs was measured, not a datasheet


# Copy bandwidth measured on our H200 (docs/TEAM_NOTES.md: 8.6 GB in 2.0 ms); the FLOP
# peaks are the datasheet's SXM numbers, L2 as PyTorch reports it.
_KNOWN = (
    DeviceCeilings("H200", 4300.0, 67.0, 495.0, 60 * 2**20, measured=True),
    DeviceCeilings("H100", 3000.0, 67.0, 495.0, 50 * 2**20),
    DeviceCeilings("A100", 1700.0, 19.5, 156.0, 40 * 2**20),
)


def ceilings_for(
    device_name: str, copy_bandwidth_gbs: float | None = None
) -> DeviceCeilings | None:
    """Ceilings for a device name as CUDA reports it; None when unknown (no roofline)."""
    for known in _KNOWN:
        if known.name.lower() in device_name.lower():
            if copy_bandwidth_gbs:
                return DeviceCeilings(
                    known.name,
                    copy_bandwidth_gbs,
                    known.fp32_tflops,
                    known.tf32_tflops,
                    known.l2_bytes,
                    measured=True,
                )
            return known
    if copy_bandwidth_gbs:
        return DeviceCeilings(device_name, copy_bandwidth_gbs, 0.0, 0.0, 0, measured=True)
    return None


@dataclass(frozen=True)
class RooflineCheck:
    device: str
    bytes_in: int  # inputs + parameters + buffers
    bytes_out: int
    bytes_floor: int  # what must cross HBM inside the timed window
    floor_ms: float  # bytes_floor / copy bandwidth
    slack: float
    candidate_ms: float
    below_floor: bool  # candidate faster than slack x floor: physically implausible
    max_plausible_speedup: float | None  # baseline_ms / floor_ms
    flops: int | None  # the reference's counted FLOPs (matmul/conv)
    fp32_flop_floor_ms: float | None
    tf32_flop_floor_ms: float | None
    beats_fp32_flops: bool  # algebraic rewrite or reduced precision
    reason: str

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _flop_floor_ms(flops: int | None, peak_tflops: float) -> float | None:
    """Milliseconds ``flops`` take at ``peak_tflops``; None when either is unknown (zero)."""
    return flops / (peak_tflops * 1e12) * 1e3 if flops and peak_tflops else None


def roofline_check(
    *,
    ceilings: DeviceCeilings,
    bytes_in: int,
    bytes_out: int,
    candidate_ms: float,
    baseline_ms: float | None,
    flops: int | None,
    slack: float,
) -> RooflineCheck:
    """Compare a measured time against the data-movement floor of the problem."""
    bytes_floor = bytes_in + max(0, bytes_out - ceilings.l2_bytes)
    floor_ms = data_movement.floor_ms(bytes_floor, ceilings.copy_bandwidth_gbs)
    below = candidate_ms < slack * floor_ms
    max_speedup = baseline_ms / floor_ms if baseline_ms and floor_ms > 0 else None
    fp32_ms = _flop_floor_ms(flops, ceilings.fp32_tflops)
    tf32_ms = _flop_floor_ms(flops, ceilings.tf32_tflops)
    beats = fp32_ms is not None and candidate_ms < fp32_ms
    if below:
        reason = (
            f"{candidate_ms:.4g} ms is below {slack:g} x the {floor_ms:.4g} ms needed to move "
            f"{bytes_floor / 1e6:.4g} MB at {ceilings.copy_bandwidth_gbs:g} GB/s: physically "
            "implausible, re-time before trusting it"
        )
    else:
        reason = f"above the {floor_ms:.4g} ms data-movement floor"
        if beats:
            reason += (
                f"; faster than the reference's {flops / 1e9:.4g} GFLOP allow at fp32 peak "
                f"({fp32_ms:.4g} ms): an algebraic rewrite (precision was checked by V_model)"
            )
    return RooflineCheck(
        device=ceilings.name,
        bytes_in=bytes_in,
        bytes_out=bytes_out,
        bytes_floor=bytes_floor,
        floor_ms=floor_ms,
        slack=slack,
        candidate_ms=candidate_ms,
        below_floor=below,
        max_plausible_speedup=max_speedup,
        flops=flops,
        fp32_flop_floor_ms=fp32_ms,
        tf32_flop_floor_ms=tf32_ms,
        beats_fp32_flops=beats,
        reason=reason,
    )
