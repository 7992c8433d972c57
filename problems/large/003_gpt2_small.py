"""GPT-2-small-like decoder: 12 causal pre-LN blocks, width 768, 12 heads, batch 8 x 1024.

Category: large model (causal language-model decoder, issue 31).
Why it is interesting: per block two layer norms, a masked softmax attention,
tanh-GELU and residual adds around the library GEMMs -- 100+ Triton kernel
launches per forward -- ending in a 50257-wide vocabulary projection whose
GEMM dominates the library fraction. The input is the token embeddings (the
suite's inputs are float tensors); positions are learned inside.
``KERNELOPT_SMALL=1`` keeps the depth but shrinks width, vocabulary, batch and
sequence for CPU tests.
"""

import math
import os

import torch
import torch.nn as nn

SMALL = os.environ.get("KERNELOPT_SMALL") == "1"
BATCH, SEQ, DIM, HEADS, VOCAB = (2, 32, 64, 4, 512) if SMALL else (8, 1024, 768, 12, 50257)
LAYERS = 12


def gelu_tanh(x):
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x**3)))


class Block(nn.Module):
    def __init__(self, dim: int, heads: int, seq: int):
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.ln2 = nn.LayerNorm(dim)
        self.up = nn.Linear(dim, 4 * dim)
        self.down = nn.Linear(4 * dim, dim)
        self.register_buffer("mask", torch.ones(seq, seq, dtype=torch.bool).tril())

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).reshape(b, t, 3, self.heads, -1).permute(2, 0, 3, 1, 4)
        scores = (q @ k.transpose(-2, -1)) / math.sqrt(q.shape[-1])
        scores = scores.masked_fill(~self.mask[:t, :t], float("-inf"))
        attn = torch.softmax(scores, dim=-1) @ v
        x = x + self.proj(attn.transpose(1, 2).reshape(b, t, d))
        return x + self.down(gelu_tanh(self.up(self.ln2(x))))


class Model(nn.Module):
    def __init__(self, dim: int, heads: int, layers: int, seq: int, vocab: int):
        super().__init__()
        self.pos = nn.Parameter(0.02 * torch.randn(seq, dim))
        self.blocks = nn.Sequential(*(Block(dim, heads, seq) for _ in range(layers)))
        self.ln_f = nn.LayerNorm(dim)
        self.lm_head = nn.Linear(dim, vocab, bias=False)

    def forward(self, x):
        x = x + self.pos[: x.shape[1]]
        return self.lm_head(self.ln_f(self.blocks(x)))


def get_inputs():
    return [torch.randn(BATCH, SEQ, DIM)]


def get_holdout_inputs():
    return [[torch.randn(1, SEQ, DIM)], [torch.randn(3, SEQ // 2 + 1, DIM)]]


def get_init_inputs():
    return [DIM, HEADS, LAYERS, SEQ, VOCAB]
