"""gates.call_policy's seeding: the same draws before every reference and candidate call."""

from __future__ import annotations

import random

import pytest
import torch

from gates.call_policy import seed_everything


def _draws(generator: torch.Generator, device: str = "cpu") -> tuple:
    return (
        torch.rand(4, device=device).tolist(),
        torch.randint(0, 1000, (3,), device=device).tolist(),
        random.random(),
        torch.rand(2, generator=generator).tolist(),
    )


def test_seeding_repeats_every_stream_a_forward_draws_from() -> None:
    own = torch.Generator()
    seed_everything(11, [own])
    first = _draws(own)
    torch.rand(100), random.random(), torch.rand(5, generator=own)  # streams move on
    seed_everything(11, [own])
    assert _draws(own) == first
    seed_everything(12, [own])
    assert _draws(own) != first


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_seeding_repeats_cuda_draws() -> None:
    own = torch.Generator()
    seed_everything(3, [own])
    first = _draws(own, "cuda")
    seed_everything(3, [own])
    assert _draws(own, "cuda") == first
