"""Pre-LN transformer block: causal multi-head attention by explicit matmul + softmax, then a GELU MLP.

Shapes: batch 4, 256 tokens, model dim 512, 8 heads, MLP 4x.
Category: small model (attention + MLP).
Why it is interesting: GEMMs for QKV, scores, values, output and MLP
projections interleaved with LayerNorm, mask, softmax and residual kernels:
the realistic transformer mix whose library fraction bounds the end-to-end
gain (section 7 of the spec), with a fusable attention core in between.
"""

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

BATCH, TOKENS, DIM, HEADS = 4, 256, 512, 8


class Model(nn.Module):
    def __init__(self, dim: int, heads: int, max_tokens: int):
        super().__init__()
        self.heads = heads
        self.head_dim = dim // heads
        self.ln1 = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.out = nn.Linear(dim, dim)
        self.ln2 = nn.LayerNorm(dim)
        self.fc1 = nn.Linear(dim, 4 * dim)
        self.fc2 = nn.Linear(4 * dim, dim)
        mask = torch.triu(torch.ones(max_tokens, max_tokens, dtype=torch.bool), diagonal=1)
        self.register_buffer("causal_mask", mask, persistent=False)

    def attention(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(x).split(d, dim=-1)
        q = q.view(b, t, self.heads, self.head_dim).transpose(1, 2)
        k = k.view(b, t, self.heads, self.head_dim).transpose(1, 2)
        v = v.view(b, t, self.heads, self.head_dim).transpose(1, 2)
        scores = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(self.head_dim)
        scores = scores.masked_fill(self.causal_mask[:t, :t], float("-inf"))
        weights = torch.softmax(scores, dim=-1)
        y = torch.matmul(weights, v).transpose(1, 2).reshape(b, t, d)
        return self.out(y)

    def forward(self, x):
        x = x + self.attention(self.ln1(x))
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


def get_inputs():
    return [torch.randn(BATCH, TOKENS, DIM)]


def get_holdout_inputs():
    return [[torch.randn(1, TOKENS, DIM)], [torch.randn(2, 100, DIM)]]


def get_init_inputs():
    return [DIM, HEADS, TOKENS]
