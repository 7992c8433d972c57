"""Attention scores: softmax(Q @ K^T / sqrt(d)) for 8 x 16 heads, 512 tokens, head dim 64.

Category: batched GEMM + scale + softmax (the first half of attention).
Why it is interesting: the (128, 512, 512) score tensor is written by bmm and
re-read by softmax; a fused kernel keeps a whole 512-wide score row on chip.
"""

import math

import torch
import torch.nn as nn

BATCH, HEADS, TOKENS, HEAD_DIM = 8, 16, 512, 64


class Model(nn.Module):
    def __init__(self, head_dim: int):
        super().__init__()
        self.scale = 1.0 / math.sqrt(head_dim)

    def forward(self, q, k):
        scores = torch.matmul(q, k.transpose(-2, -1)) * self.scale
        return torch.softmax(scores, dim=-1)


def get_inputs():
    shape = (BATCH, HEADS, TOKENS, HEAD_DIM)
    return [torch.randn(*shape), torch.randn(*shape)]


def get_holdout_inputs():
    small = (1, HEADS, 100, HEAD_DIM)
    odd = (2, HEADS, 333, HEAD_DIM)
    return [[torch.randn(*small), torch.randn(*small)], [torch.randn(*odd), torch.randn(*odd)]]


def get_init_inputs():
    return [HEAD_DIM]
