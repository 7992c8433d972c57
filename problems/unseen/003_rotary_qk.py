"""Rotary position embedding on queries and keys (32 query heads, 8 key/value heads, head dim 128).

Shapes: batch 4, 2048 tokens; q is 4x32x2048x128, k is 4x8x2048x128 (grouped-query attention).
Category: pointwise with a half swap (rotate-half) and broadcast tables.
Why it is interesting: every output element needs its partner from the other
half of the head dimension (``cat(-x2, x1)``), the cos/sin tables broadcast over
batch and heads, and q and k have different head counts but share the tables.
No reduction and no GEMM: two memory-bound outputs whose only difficulty is the
shuffle and the table reads.
"""

import torch
import torch.nn as nn

BATCH, Q_HEADS, KV_HEADS, TOKENS, HEAD_DIM = 4, 32, 8, 2048, 128
MAX_TOKENS = 4096


class Model(nn.Module):
    def __init__(self, head_dim: int, max_tokens: int, base: float = 10000.0):
        super().__init__()
        inv_freq = base ** (-torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim)
        angles = torch.outer(torch.arange(max_tokens, dtype=torch.float32), inv_freq)
        angles = torch.cat([angles, angles], dim=-1)
        self.register_buffer("cos_table", angles.cos(), persistent=False)
        self.register_buffer("sin_table", angles.sin(), persistent=False)

    @staticmethod
    def rotate_half(x):
        first, second = x.chunk(2, dim=-1)
        return torch.cat([-second, first], dim=-1)

    def forward(self, q, k):
        tokens = q.shape[-2]
        cos, sin = self.cos_table[:tokens], self.sin_table[:tokens]
        return q * cos + self.rotate_half(q) * sin, k * cos + self.rotate_half(k) * sin


def get_inputs():
    return [
        torch.randn(BATCH, Q_HEADS, TOKENS, HEAD_DIM),
        torch.randn(BATCH, KV_HEADS, TOKENS, HEAD_DIM),
    ]


def get_holdout_inputs():
    # the head dimension is baked into the tables; batch and length vary (length <= MAX_TOKENS)
    return [
        [torch.randn(1, Q_HEADS, 777, HEAD_DIM), torch.randn(1, KV_HEADS, 777, HEAD_DIM)],
        [torch.randn(2, Q_HEADS, 100, HEAD_DIM), torch.randn(2, KV_HEADS, 100, HEAD_DIM)],
    ]


def get_init_inputs():
    return [HEAD_DIM, MAX_TOKENS]
