"""Inputs drawn from a seed: the same wherever they are made, and one shape for every seed."""

from __future__ import annotations

import random

import numpy
import torch

from kernelopt.loaded_problem import input_signature, seed_dependent_inputs, seeded


def _sizes_from_python_and_numpy() -> tuple[int, float, float]:
    return random.randint(1, 10**6), float(numpy.random.rand()), float(torch.rand(()))


def test_a_seed_fixes_what_get_inputs_draws_with_random_and_numpy_too() -> None:
    first = seeded(3, _sizes_from_python_and_numpy)
    random.seed(99)
    numpy.random.seed(99)  # whatever ran before must not matter
    assert seeded(3, _sizes_from_python_and_numpy) == first
    assert seeded(4, _sizes_from_python_and_numpy) != first


def test_inputs_that_keep_their_shapes_and_values_across_seeds_pass() -> None:
    def make(seed: int) -> list[object]:
        return seeded(seed, lambda: [torch.randn(4, 3), 7, torch.randint(0, 5, (2,))])

    assert seed_dependent_inputs(make) == ""


def test_a_shape_or_a_plain_value_that_changes_with_the_seed_is_named() -> None:
    def shape(seed: int) -> list[object]:
        return seeded(seed, lambda: [torch.randn(random.randint(2, 50), 3)])

    why = seed_dependent_inputs(shape)
    assert why.startswith("get_inputs() gives other inputs under other seeds: input 0 is ")
    assert "a tensor of shape (" in why and "(float32)" in why and "same for every seed" in why

    def scale(seed: int) -> list[object]:
        return [torch.ones(2), 0.5 + seed]

    assert "input 1 is 0.5 under seed 0 and 1.5 under seed 1" in seed_dependent_inputs(scale)
    assert "2 inputs under seed 0 and 3 under seed 1" in seed_dependent_inputs(
        lambda s: [torch.ones(1)] * (2 + s)
    )
    assert input_signature(torch.zeros(2, 1, dtype=torch.int64)) == (
        "a tensor of shape (2, 1) (int64)"
    )
    assert input_signature(object()) == input_signature(object()) == "a object"
