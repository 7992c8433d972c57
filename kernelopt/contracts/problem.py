"""What the user asked us to optimise."""

from __future__ import annotations

from enum import StrEnum

from .base import ArtifactRef, Frozen


class ProblemKind(StrEnum):
    MODULE = "module"  # KernelBench file: Model, get_inputs, get_init_inputs
    TRITON = "triton"  # standalone Triton kernel + launcher + reference
    HELION = "helion"  # a @helion.kernel function + reference


class ProblemSpec(Frozen):
    """A problem as it travels through a campaign: its source lives in the store."""

    name: str
    kind: ProblemKind = ProblemKind.MODULE
    source: ArtifactRef
    path: str = ""  # where the user's file was, for display only
    seed: int = 0  # inputs and weights are drawn from this seed
    level: int | None = None  # KernelBench level, when known (bench suites)
