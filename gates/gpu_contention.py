"""Is other work on the GPU?  Asked only when gate 4's rounds disagree.

On a GPU shared with other work (time-sliced between containers, or another
job on the host) the same eager forward's CUDA events read 10x apart from one
round to the next, and the verdict can only be a quarantine.  The user should
learn why: NVML's device utilisation while none of the gate's processes runs
shows that work, once the gate's own last kernels have left NVML's look-back
window.  A diagnostic only: it never changes a verdict, and a clean
measurement never pays for it.  ``GateSettings.quiet_gpu_wait_s`` (off by default)
also waits, before each timing round, for such work to pause.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from kernelopt.gpu_busy import NvmlUnavailable, SampleSource, nvml_source
from kernelopt.gpu_info import pinned_gpu

BUSY_SHARE = 0.2  # idle-time samples above this share busy: other work, worth saying
# ...and busy for real: a time-sliced job keeps the GPU well above this; a stray
# sample of 1-2% is a context's housekeeping, not work that moves a round tenfold
MEAN_UTIL_PCT = 5.0
# NVML's utilisation covers the last 1/6 to 1 s: read sooner and it shows our own child
LOOK_BACK_S = 1.0
QUIET_LOOK_S = 0.2  # one look before a round (``wait_for_quiet``)


@dataclass(frozen=True)
class OtherWork:
    samples: int
    busy_share: float  # share of samples with any kernel running
    mean_util: float  # mean NVML utilisation %, over all samples

    @property
    def seen(self) -> bool:
        return self.busy_share > BUSY_SHARE and self.mean_util >= MEAN_UTIL_PCT

    def describe(self) -> str:
        return (
            f"the GPU was busy with other work while the gate was idle (NVML: "
            f"{self.busy_share:.0%} of {self.samples} samples busy, mean utilisation "
            f"{self.mean_util:.0f}%): a GPU shared with other jobs cannot time this reliably"
        )

    def as_dict(self) -> dict[str, Any]:
        return asdict(self) | {"seen": self.seen}


def nvml_device(device: str) -> str:
    """The NVML name of the gate's GPU: the worker's pinned GPU (an index or a UUID), else
    the index in ``cuda:N``."""
    visible = pinned_gpu()
    if visible:
        return visible
    _, _, index = device.partition(":")
    return index or "0"


def sample_idle(
    source: SampleSource,
    *,
    seconds: float = 0.5,
    interval_s: float = 0.05,
    sleep: Callable[[float], None] = time.sleep,
) -> OtherWork:
    """Read ``source`` every ``interval_s`` for ``seconds`` while nothing of ours runs."""
    count = max(1, round(seconds / interval_s))
    utils = []
    for i in range(count):
        if i:
            sleep(interval_s)
        utils.append(source()[0])
    busy = sum(1 for u in utils if u > 0)
    return OtherWork(count, busy / count, sum(utils) / count)


def wait_for_quiet(
    device: str,
    limit_s: float,
    *,
    probe: Callable[[str, float], OtherWork | None] | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> float | None:
    """Seconds spent waiting for the GPU to show no other work, at most about ``limit_s``.

    Each look is a short idle reading (``other_work``); a GPU that stays busy is timed
    anyway once the limit is spent.  None: the limit is off, or NVML cannot be read.
    """
    if limit_s <= 0:
        return None
    look = probe or other_work
    start = clock()
    while True:
        reading = look(device, QUIET_LOOK_S)
        if reading is None:
            return None
        if not reading.seen or clock() - start >= limit_s:
            return round(clock() - start, 3)


def other_work(
    device: str,
    seconds: float = 0.5,
    *,
    look_back_s: float = LOOK_BACK_S,
    sleep: Callable[[float], None] = time.sleep,
) -> OtherWork | None:
    """``sample_idle`` on the gate's GPU once ``look_back_s`` has passed since our last child
    (``wait_for_quiet`` runs before a round, after that pause); None where NVML cannot be
    read (no GPU, no driver)."""
    if not device.startswith("cuda"):
        return None
    try:
        source, release = nvml_source(nvml_device(device))
    except NvmlUnavailable:
        return None
    try:
        if look_back_s > 0:
            sleep(look_back_s)
        return sample_idle(source, seconds=seconds)
    except Exception:  # a diagnostic: a failed read must not fail the verdict
        return None
    finally:
        release()
