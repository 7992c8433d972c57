"""SimCLR's NT-Xent contrastive loss: 2 x 4096 projected views of width 128, temperature 0.5.

Shapes: z1 and z2 are 4096x128; the similarity matrix is 8192x8192.
Category: GEMM + masked row log-sum-exp + gather + mean (a loss reduced to a scalar).
Why it is interesting: the similarity matrix exists only to be reduced: every
row needs its log-sum-exp with its own diagonal masked out and one
off-diagonal entry (the other view of the same example) picked out, and then
everything collapses to one number. The GEMM has K = 128, so the pass over the
256 MiB of scores is a large share of the time, and the masked diagonal and
the shifted positive diagonal are structure the scores never need to store.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

PAIRS, DIM = 4096, 128


class Model(nn.Module):
    def __init__(self, temperature: float = 0.5):
        super().__init__()
        self.temperature = temperature

    def forward(self, z1, z2):
        n = z1.shape[0]
        z = F.normalize(torch.cat([z1, z2], dim=0), dim=-1)
        sim = z @ z.t() / self.temperature
        self_pairs = torch.eye(2 * n, dtype=torch.bool, device=z.device)
        sim = sim.masked_fill(self_pairs, float("-inf"))
        other_view = torch.arange(2 * n, device=z.device).roll(n)  # (i + n) mod 2n
        return F.cross_entropy(sim, other_view)


def get_inputs():
    return [torch.randn(PAIRS, DIM), torch.randn(PAIRS, DIM)]


def get_holdout_inputs():
    return [
        [torch.randn(512, DIM), torch.randn(512, DIM)],
        [torch.randn(1000, DIM), torch.randn(1000, DIM)],
    ]


def get_init_inputs():
    return [0.5]
