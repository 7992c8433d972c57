"""Gate 3's float64 rule on the sampled elements of every timed call.

A round keeps only a few timed outputs whole, so a kernel that is less exact in some
timed calls (within gate 2's tolerance, outside gate 3's) could slip between them.
Every call's sampled elements are held to the rule here, as far as they can prove
it fails: an error maximum over some elements never exceeds the one over all of
them, so with the whole output's baseline numbers (``d_ref``, the scales) a sample
that fails the rule means the whole output would, and this is never stricter than
gate 3 on the whole output.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from gates.numerics import BaselineFloat64


@dataclass(frozen=True)
class SampledRule:
    """Gate 3's rule for one input set, with the float64 reference flat per output leaf."""

    refs64: dict[int, torch.Tensor]  # output leaf -> its float64 values, flat (float leaves)
    numbers: BaselineFloat64
    tolerance: float
    rho_max: float
    d_ref_floor: float
    abs_bound: float

    @property
    def bound(self) -> float:
        """The float64 error above which an output outside the tolerance fails."""
        n = self.numbers
        if n.d_ref >= self.d_ref_floor:
            return self.rho_max * n.d_ref
        return self.tolerance * n.scale + self.abs_bound

    def describe(self, d_opt: float) -> str:
        n = self.numbers
        if n.d_ref >= self.d_ref_floor:
            return (
                f"sampled error {d_opt:.3g} against the float64 reference is "
                f"{d_opt / n.d_ref:.3g} x the baseline's own {n.d_ref:.3g} (> {self.rho_max:g})"
            )
        return (
            f"sampled error {d_opt:.3g} against the float64 reference > "
            f"{self.tolerance:g} x {n.scale:.3g} + {self.abs_bound:g} (the baseline is exact)"
        )


@dataclass
class SampledErrors:
    """Per call, what its samples prove: outside gate 3's tolerance, and the float64 error."""

    outside: torch.Tensor  # bool per call
    d_32: torch.Tensor  # max |out - b32| over the finite samples
    d_opt: torch.Tensor  # max |out - b64| over the finite samples

    @classmethod
    def empty(cls, calls: int) -> SampledErrors:
        zeros = torch.zeros(calls, dtype=torch.float64)
        return cls(torch.zeros(calls, dtype=torch.bool), zeros, zeros.clone())

    def add(
        self,
        rows: torch.Tensor,
        got: torch.Tensor,
        want: torch.Tensor,
        want64: torch.Tensor,
        tolerance: float,
    ) -> None:
        """One output leaf's samples of the calls ``rows``; only finite triples count."""
        finite = torch.isfinite(got) & torch.isfinite(want) & torch.isfinite(want64)
        err32 = torch.where(finite, (got - want).abs(), 0.0)
        err64 = torch.where(finite, (got - want64).abs(), 0.0)
        far = finite & (err32 > tolerance + tolerance * want.abs())  # isclose(out, b32) fails
        self.outside[rows] |= far.any(dim=1)
        self.d_32[rows] = torch.maximum(self.d_32[rows], err32.amax(dim=1))
        self.d_opt[rows] = torch.maximum(self.d_opt[rows], err64.amax(dim=1))

    def failing(self, rows: torch.Tensor, rule: SampledRule) -> torch.Tensor:
        """Which of ``rows`` the samples prove outside gate 3's rule."""
        n = rule.numbers
        outside = self.outside[rows] | (
            self.d_32[rows] > rule.tolerance * n.scale32 + rule.abs_bound
        )
        return outside & (self.d_opt[rows] > rule.bound)
