"""Float jitter between same-seed reference calls, and naming an op that differs now and then."""

from __future__ import annotations

import pytest
import torch

from gates.nondeterminism import JITTER_REL, TRACE_TRIES, divergent_op, float_jitter


def test_last_bit_differences_are_jitter_and_larger_ones_are_not() -> None:
    x = torch.linspace(-100.0, 100.0, 1000)
    tiny = x.clone()
    tiny[3] += 100.0 * JITTER_REL / 2
    assert float_jitter([x, 3], [tiny, 3]) == pytest.approx(JITTER_REL / 2, rel=0.05)
    big = x.clone()
    big[3] += 100.0 * JITTER_REL * 2
    assert float_jitter([x], [big]) is None
    assert float_jitter([x], [x.clone()]) == 0.0


def test_integers_shapes_nans_and_other_values_are_never_jitter() -> None:
    assert float_jitter([torch.tensor([1, 2])], [torch.tensor([1, 3])]) is None
    assert float_jitter([torch.zeros(3)], [torch.zeros(4)]) is None
    assert float_jitter([torch.zeros(3)], [torch.tensor([0.0, 0.0, 1e-30])]) is None  # no scale
    nan = torch.tensor([1.0, float("nan")])
    assert float_jitter([nan], [torch.tensor([float("nan"), 1.0])]) is None
    assert float_jitter([nan], [nan.clone()]) == 0.0
    assert float_jitter([torch.ones(2), 1], [torch.ones(2), 2]) is None
    assert float_jitter([torch.ones(2)], [torch.ones(2), torch.ones(2)]) is None


def test_an_op_that_differs_only_now_and_then_is_still_named(tmp_path) -> None:
    """Atomics give another result only in some calls: one pair of traced calls may agree."""
    calls = {"n": 0}

    def call() -> torch.Tensor:
        calls["n"] += 1
        y = torch.ones(4).exp()
        return y + (1.0 if calls["n"] == TRACE_TRIES else 0.0)  # only the last try differs

    assert divergent_op(call, str(tmp_path / "problem.py")).startswith("aten.add")
    calls["n"] = -100  # never differs within the tries: unnamed, not a wrong name
    assert divergent_op(call, str(tmp_path / "problem.py")) == ""
