"""ViT-B/16-like encoder: 12 pre-LN blocks, width 768, 12 heads, batch 128 at 384x384.

Category: large model (vision transformer encoder, issue 31).
Why it is interesting: as in the original ViT, a 16x16 stride-16 convolution embeds
the patches and a tanh pre-logits layer precedes the head; in between, per block two
layer norms, an explicit softmax attention (queries scaled, two batched GEMMs, softmax),
GELU and two residual adds: about nine Triton kernel launches per block around the
library GEMMs, over a hundred per forward (problems/large/README.md has the count),
with attention's softmax and the norms competing for the largest Amdahl share.  The
resolution is 384, as in the published ViT-B/16 ImageNet numbers: 577 tokens, at
which max-autotune picks a Triton template for the scores' GEMM.
``KERNELOPT_SMALL=1`` keeps the depth but shrinks width, batch and resolution for
CPU tests.
"""

import os

import torch
import torch.nn as nn

SMALL = os.environ.get("KERNELOPT_SMALL") == "1"
BATCH, IMAGE, PATCH, DIM, HEADS = (2, 32, 16, 64, 4) if SMALL else (128, 384, 16, 768, 12)
DEPTH = 12
CLASSES = 10 if SMALL else 1000


class Block(nn.Module):
    def __init__(self, dim: int, heads: int):
        super().__init__()
        self.heads = heads
        self.norm1 = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.norm2 = nn.LayerNorm(dim)
        self.fc1 = nn.Linear(dim, 4 * dim)
        self.fc2 = nn.Linear(4 * dim, dim)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.norm1(x)).reshape(b, t, 3, self.heads, -1).permute(2, 0, 3, 1, 4)
        # the original ViT scales the queries, not the scores, before the product
        scores = (q * (q.shape[-1] ** -0.5)) @ k.transpose(-2, -1)
        attn = torch.softmax(scores, dim=-1) @ v
        x = x + self.proj(attn.transpose(1, 2).reshape(b, t, d))
        return x + self.fc2(nn.functional.gelu(self.fc1(self.norm2(x))))


class Model(nn.Module):
    def __init__(self, image: int, patch: int, dim: int, heads: int, depth: int, classes: int):
        super().__init__()
        self.embed = nn.Conv2d(3, dim, patch, stride=patch)
        self.cls = nn.Parameter(0.02 * torch.randn(1, 1, dim))
        self.pos = nn.Parameter(0.02 * torch.randn(1, (image // patch) ** 2 + 1, dim))
        self.blocks = nn.Sequential(*(Block(dim, heads) for _ in range(depth)))
        self.norm = nn.LayerNorm(dim)
        self.pre_logits = nn.Linear(dim, dim)
        self.head = nn.Linear(dim, classes)

    def forward(self, x):
        b = x.shape[0]
        tokens = self.embed(x).flatten(2).transpose(1, 2)  # one token per patch
        tokens = torch.cat([self.cls.expand(b, -1, -1), tokens], dim=1)
        # positions are learned for the main image size; other sizes use the leading ones
        tokens = tokens + self.pos[:, : tokens.shape[1]]
        return self.head(torch.tanh(self.pre_logits(self.norm(self.blocks(tokens))[:, 0])))


def get_inputs():
    return [torch.randn(BATCH, 3, IMAGE, IMAGE)]


def get_holdout_inputs():
    return [[torch.randn(1, 3, IMAGE, IMAGE)], [torch.randn(3, 3, IMAGE, IMAGE - PATCH)]]


def get_init_inputs():
    return [IMAGE, PATCH, DIM, HEADS, DEPTH, CLASSES]
