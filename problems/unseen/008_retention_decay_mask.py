"""Parallel retention (RetNet style): q k^T times a causal per-head decay matrix, then times v.

Shapes: batch 4, 8 heads, 1024 tokens, key dim 64, value dim 128.
Category: batched GEMM + structured-mask epilogue + row reduction + batched GEMM.
Why it is interesting: the decay matrix D[h, i, j] = gamma_h^(i - j) for
j <= i (zero above the diagonal) is built from indices inside the forward: a
lower-triangular Toeplitz matrix per head, which no library call knows and no
``tril`` names. Its rows are normalised, the scores are scaled by it, divided
by their row's absolute sum (at least 1) and multiplied by v; half of every
score matrix is exact zeros.
"""

import torch
import torch.nn as nn

BATCH, HEADS, TOKENS, KEY_DIM, VALUE_DIM = 4, 8, 1024, 64, 128


class Model(nn.Module):
    def __init__(self, heads: int, key_dim: int):
        super().__init__()
        # one decay rate per head, from 1 - 2^-5 (long memory) to 1 - 2^-12
        gamma = 1.0 - torch.exp2(-5.0 - torch.arange(heads, dtype=torch.float32))
        self.register_buffer("log_gamma", torch.log(gamma), persistent=False)
        self.scale = key_dim**-0.5

    def forward(self, q, k, v):
        tokens = q.shape[-2]
        pos = torch.arange(tokens, device=q.device)
        distance = pos[:, None] - pos[None, :]
        decay = torch.exp(self.log_gamma[:, None, None] * distance.clamp(min=0))
        decay = torch.where(distance >= 0, decay, torch.zeros_like(decay))
        decay = decay / decay.sum(dim=-1, keepdim=True).sqrt()
        scores = torch.matmul(q, k.transpose(-1, -2)) * self.scale * decay
        scores = scores / scores.abs().sum(dim=-1, keepdim=True).clamp(min=1.0)
        return torch.matmul(scores, v)


def get_inputs():
    return [
        torch.randn(BATCH, HEADS, TOKENS, KEY_DIM),
        torch.randn(BATCH, HEADS, TOKENS, KEY_DIM),
        torch.randn(BATCH, HEADS, TOKENS, VALUE_DIM),
    ]


def get_holdout_inputs():
    # the head count is baked into the decay rates; batch and length vary
    return [
        [
            torch.randn(1, HEADS, 257, KEY_DIM),
            torch.randn(1, HEADS, 257, KEY_DIM),
            torch.randn(1, HEADS, 257, VALUE_DIM),
        ],
        [
            torch.randn(2, HEADS, 100, KEY_DIM),
            torch.randn(2, HEADS, 100, KEY_DIM),
            torch.randn(2, HEADS, 100, VALUE_DIM),
        ],
    ]


def get_init_inputs():
    return [HEADS, KEY_DIM]
