"""A gated recurrent cell (not a GRU: one sigmoid gate, one tanh candidate) unrolled 8 steps.

h_t = g * h_{t-1} + (1 - g) * tanh(x_t W + h_{t-1} U + b), g = sigmoid(x_t Wg + h_{t-1} Ug + bg).
Shapes: 8 steps, batch 256, input 512, hidden 1024.
Category: small model (recurrence).
Why it is interesting: the sequential dependency forces one small GEMM pair
per step, with a pointwise gate kernel in between; launch overhead and the
per-step pointwise kernels are a larger share of time than in big models.
"""

import torch
import torch.nn as nn

STEPS, BATCH, INPUT, HIDDEN = 8, 256, 512, 1024


class Model(nn.Module):
    def __init__(self, input_size: int, hidden: int):
        super().__init__()
        self.x_proj = nn.Linear(input_size, 2 * hidden)
        self.h_proj = nn.Linear(hidden, 2 * hidden, bias=False)
        self.hidden = hidden

    def forward(self, xs, h0):
        # the input projection of all steps is one big GEMM; only h_proj is sequential
        x_all = self.x_proj(xs)
        h = h0
        for t in range(xs.shape[0]):
            pre = x_all[t] + self.h_proj(h)
            cand, gate = pre.split(self.hidden, dim=-1)
            g = torch.sigmoid(gate)
            h = g * h + (1.0 - g) * torch.tanh(cand)
        return h


def get_inputs():
    return [torch.randn(STEPS, BATCH, INPUT), torch.randn(BATCH, HIDDEN)]


def get_holdout_inputs():
    return [
        [torch.randn(STEPS, 1, INPUT), torch.randn(1, HIDDEN)],
        [torch.randn(STEPS, 100, INPUT), torch.randn(100, HIDDEN)],
    ]


def get_init_inputs():
    return [INPUT, HIDDEN]
