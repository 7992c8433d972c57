"""The cut-offs on what a campaign searches: here, the kernels' combined Amdahl bound."""

from __future__ import annotations

import pytest

from kernelopt.contracts.target_cutoff import kernels_short_of_gamma


@pytest.mark.parametrize(
    ("triton_ms", "total_ms", "gamma", "short"),
    [
        (0.02, 2.02, 1.03, True),  # 1%: at most 1.010x
        (0.10, 2.10, 1.03, False),  # 4.8%: up to 1.050x, enough for gamma
        (0.02, 2.02, 1.005, False),  # a smaller gamma is within reach
        (2.0, 2.0, 1.03, False),  # all of the forward: unbounded
        (0.0, 2.0, 1.03, False),  # nothing measured: no claim
        (0.1, 0.0, 1.03, False),
    ],
)
def test_kernels_are_short_of_gamma_only_where_even_infinitely_fast_they_miss_it(
    triton_ms: float, total_ms: float, gamma: float, short: bool
) -> None:
    why = kernels_short_of_gamma(triton_ms, total_ms, gamma)
    assert bool(why) is short
    if short:
        ceiling = 1.0 / (1.0 - triton_ms / total_ms)
        assert f"at most {ceiling:.3f}x" in why and f"gamma {gamma:g}" in why
