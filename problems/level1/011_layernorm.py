"""LayerNorm over the last dim (4096) of a (4, 2048, 4096) activation, with affine weights.

Category: reduction + normalisation (mean, variance, scale, shift).
Why it is interesting: the classic fused-normalisation kernel; Welford vs.
two-pass variance is a numerics choice the model-level gate can observe.
"""

import torch
import torch.nn as nn

BATCH, TOKENS, HIDDEN = 4, 2048, 4096


class Model(nn.Module):
    def __init__(self, hidden: int):
        super().__init__()
        self.norm = nn.LayerNorm(hidden, eps=1e-5)
        with torch.no_grad():
            # non-trivial affine parameters so a kernel that ignores them fails
            self.norm.weight.copy_(1.0 + 0.1 * torch.randn(hidden))
            self.norm.bias.copy_(0.1 * torch.randn(hidden))

    def forward(self, x):
        return self.norm(x)


def get_inputs():
    return [torch.randn(BATCH, TOKENS, HIDDEN) * 2.0 + 0.5]


def get_holdout_inputs():
    return [[torch.randn(1, 333, HIDDEN) * 2.0 + 0.5], [torch.randn(7, 512, HIDDEN)]]


def get_init_inputs():
    return [HIDDEN]
