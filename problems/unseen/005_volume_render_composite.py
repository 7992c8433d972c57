"""Volume rendering along 65,536 rays of 192 samples: alpha, exclusive-cumprod transmittance, sums.

Shapes: densities and sample depths 65536x192, raw colours 65536x192x3.
Category: scan + pointwise + reductions (alpha compositing, as in NeRF-style renderers).
Why it is interesting: a product scan sits in the middle of a chain: alpha =
1 - exp(-relu(sigma) * delta) feeds an exclusive cumulative product along each
ray, whose result weights three sums over the same samples. The colours come
with a last axis of 3, so the weighted colour sum reads a strided, odd-width
tensor; per ray everything fits on chip, so one pass per ray is possible.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

RAYS, SAMPLES = 65536, 192
NEAR, FAR = 2.0, 6.0


class Model(nn.Module):
    def __init__(self, far_delta: float = 1e10):
        super().__init__()
        self.far_delta = far_delta

    def forward(self, sigma, rgb, depths):
        delta = depths[..., 1:] - depths[..., :-1]
        delta = torch.cat([delta, torch.full_like(delta[..., :1], self.far_delta)], dim=-1)
        alpha = 1.0 - torch.exp(-F.relu(sigma) * delta)
        transmittance = torch.cumprod(1.0 - alpha + 1e-10, dim=-1)
        transmittance = torch.cat(
            [torch.ones_like(transmittance[..., :1]), transmittance[..., :-1]], dim=-1
        )
        weights = alpha * transmittance
        color = (weights.unsqueeze(-1) * torch.sigmoid(rgb)).sum(dim=-2)
        depth = (weights * depths).sum(dim=-1)
        opacity = weights.sum(dim=-1)
        return color, depth, opacity


def _rays(rays: int, samples: int) -> list[torch.Tensor]:
    """Raw densities and colours, and stratified (jittered, still sorted) sample depths."""
    step = (FAR - NEAR) / samples
    depths = NEAR + step * (torch.arange(samples, dtype=torch.float32) + torch.rand(rays, samples))
    return [torch.randn(rays, samples) * 2.0, torch.randn(rays, samples, 3), depths]


def get_inputs():
    return _rays(RAYS, SAMPLES)


def get_holdout_inputs():
    return [_rays(4096, 64), _rays(999, 128)]


def get_init_inputs():
    return []
