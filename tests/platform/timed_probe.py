"""A supervised-child target that works a while and claims it took no time at all."""

from __future__ import annotations

import time

from kernelopt.contracts.base import DeviceTimed, Frozen
from kernelopt.store import ArtifactStore


class NapIn(Frozen):
    seconds: float


class NapOut(DeviceTimed):
    napped: float


def nap(inp: NapIn, store: ArtifactStore) -> NapOut:
    time.sleep(inp.seconds)
    return NapOut(napped=inp.seconds, device_seconds=0.0)


class StagedOut(Frozen):
    stage_seconds: dict[str, float]


def staged(inp: NapIn, store: ArtifactStore) -> StagedOut:
    time.sleep(inp.seconds)
    return StagedOut(stage_seconds={"work": inp.seconds})
