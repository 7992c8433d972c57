"""Slot Attention with 8 learned slots and 3 iterations over a 64x64 feature map of width 128.

Shapes: batch 32, 4096 inputs of width 128; 8 slots, MLP 256 wide.
Category: small model (iterative attention with a recurrent update).
Why it is interesting: the softmax runs over the 8 slots -- the short axis --
rather than over the 4096 inputs, and the weights are then renormalised over
the inputs (a reduction along the long, strided axis) before the weighted mean.
Each iteration feeds a GRU cell and a residual MLP on only 256 slot vectors, so
thin batched GEMMs, short-row reductions and the number of launches matter
more than FLOPs.
"""

import torch
import torch.nn as nn

BATCH, INPUTS, DIM, SLOTS, ITERS, HIDDEN = 32, 4096, 128, 8, 3, 256


class Model(nn.Module):
    def __init__(self, dim: int, slots: int, iters: int, hidden: int, eps: float = 1e-8):
        super().__init__()
        self.iters = iters
        self.eps = eps
        self.scale = dim**-0.5
        # learned initial slots (no sampling in the forward)
        self.slots_init = nn.Parameter(torch.randn(1, slots, dim) * dim**-0.5)
        self.norm_inputs = nn.LayerNorm(dim)
        self.norm_slots = nn.LayerNorm(dim)
        self.norm_mlp = nn.LayerNorm(dim)
        self.to_q = nn.Linear(dim, dim, bias=False)
        self.to_k = nn.Linear(dim, dim, bias=False)
        self.to_v = nn.Linear(dim, dim, bias=False)
        self.gru = nn.GRUCell(dim, dim)
        self.mlp = nn.Sequential(nn.Linear(dim, hidden), nn.ReLU(), nn.Linear(hidden, dim))

    def forward(self, inputs):
        batch, _, dim = inputs.shape
        x = self.norm_inputs(inputs)
        k, v = self.to_k(x), self.to_v(x)
        slots = self.slots_init.repeat(batch, 1, 1)
        for _ in range(self.iters):
            previous = slots
            q = self.to_q(self.norm_slots(slots)) * self.scale
            attn = torch.softmax(torch.bmm(k, q.transpose(1, 2)), dim=-1) + self.eps
            attn = attn / attn.sum(dim=1, keepdim=True)  # weighted mean over the inputs
            updates = torch.bmm(attn.transpose(1, 2), v)
            slots = self.gru(updates.reshape(-1, dim), previous.reshape(-1, dim))
            slots = slots.view(batch, -1, dim)
            slots = slots + self.mlp(self.norm_mlp(slots))
        return slots


def get_inputs():
    return [torch.randn(BATCH, INPUTS, DIM)]


def get_holdout_inputs():
    # the number of inputs (feature-map size) and the batch vary
    return [[torch.randn(2, 1024, DIM)], [torch.randn(3, 900, DIM)]]


def get_init_inputs():
    return [DIM, SLOTS, ITERS, HIDDEN]
