"""A supervised-child target that reports which environment variables it can see."""

from __future__ import annotations

import os

from kernelopt.contracts.base import Frozen
from kernelopt.store import ArtifactStore


class ProbeIn(Frozen):
    names: list[str]


class ProbeOut(Frozen):
    visible: list[str]


def probe(inp: ProbeIn, store: ArtifactStore) -> ProbeOut:
    return ProbeOut(visible=[name for name in inp.names if name in os.environ])
