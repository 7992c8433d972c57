"""The strategy analyst: a deterministic bottleneck class for a distilled profile.

docs/method.md#agents: no LLM; ``near_optimal`` when any speed-of-light figure is
above 80 %, otherwise ``memory_bound`` / ``compute_bound`` when that unit is
the clear limiter (>= 60 % of peak and ahead of the other), otherwise
``underutilized`` (neither unit busy: latency, occupancy, launch or tail
effects).  Without counters (events-only profile) the class is ``unknown``
rather than a guess.  The reasoning string records the numbers that decided.
"""

from __future__ import annotations

from kernelopt.contracts.search import Analysis, Bottleneck, KernelProfile

NEAR_OPTIMAL_PCT = 80.0
BOUND_PCT = 60.0
LOW_OCCUPANCY_PCT = 25.0

ADVICE = {
    Bottleneck.NEAR_OPTIMAL: (
        "The kernel already runs near a hardware roofline: launch-config tweaks will not pay. "
        "Only doing less work can (fewer bytes moved or fewer instructions: fuse with a "
        "neighbour, exploit algebraic structure, avoid recomputation)."
    ),
    Bottleneck.MEMORY_BOUND: (
        "Reduce bytes moved: fuse loads, avoid re-reading inputs across loops, keep "
        "intermediates in registers, vectorise and coalesce accesses, use eviction hints "
        "for data reused soon."
    ),
    Bottleneck.COMPUTE_BOUND: (
        "Reduce instruction count: cheaper math (fast exp/rsqrt where accuracy allows), "
        "hoist loop invariants, use tl.dot / tensor cores for contractions, avoid integer "
        "index arithmetic in inner loops."
    ),
    Bottleneck.UNDERUTILIZED: (
        "Neither memory nor compute is busy: raise parallelism and latency hiding -- more "
        "programs (smaller blocks or a split reduction), more warps or stages, fewer "
        "registers/spills for higher occupancy, less serial work per program."
    ),
    Bottleneck.UNKNOWN: (
        "No hardware counters: rely on measured time; try launch-configuration and "
        "memory-traffic changes first."
    ),
}


def classify(profile: KernelProfile) -> Analysis:
    compute = profile.sol_compute_pct
    memory = profile.sol_memory_pct
    if compute is None and memory is None:
        why = "no speed-of-light counters"
        if profile.note:
            why += f" ({profile.note})"
        return Analysis(
            bottleneck=Bottleneck.UNKNOWN, reasoning=why, advice=ADVICE[Bottleneck.UNKNOWN]
        )
    c = compute or 0.0
    m = memory or 0.0
    numbers = f"SOL compute {_pct(compute)}, memory {_pct(memory)}"
    extras = []
    if profile.achieved_occupancy_pct is not None:
        extras.append(f"achieved occupancy {profile.achieved_occupancy_pct:.1f}%")
    if profile.spills:
        extras.append(f"{profile.spills} spill operations")
    detail = numbers + (f"; {', '.join(extras)}" if extras else "")
    if max(c, m) > NEAR_OPTIMAL_PCT:
        unit = "memory" if m >= c else "compute"
        bottleneck = Bottleneck.NEAR_OPTIMAL
        reasoning = f"{unit} throughput above {NEAR_OPTIMAL_PCT:.0f}% of peak ({detail})"
    elif m >= BOUND_PCT and m >= c:
        bottleneck = Bottleneck.MEMORY_BOUND
        reasoning = f"memory is the limiter at >= {BOUND_PCT:.0f}% of peak ({detail})"
    elif c >= BOUND_PCT and c > m:
        bottleneck = Bottleneck.COMPUTE_BOUND
        reasoning = f"compute is the limiter at >= {BOUND_PCT:.0f}% of peak ({detail})"
    else:
        bottleneck = Bottleneck.UNDERUTILIZED
        reasoning = f"neither unit reaches {BOUND_PCT:.0f}% of peak ({detail})"
        occ = profile.achieved_occupancy_pct
        if occ is not None and occ < LOW_OCCUPANCY_PCT:
            reasoning += "; occupancy is low"
    return Analysis(bottleneck=bottleneck, reasoning=reasoning, advice=ADVICE[bottleneck])


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.1f}%"
