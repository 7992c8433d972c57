"""A Helion problem for CPU tests: y = x * 2 + b, one @helion.kernel (interpreter sizes)."""

import helion
import helion.language as hl
import torch


@helion.kernel(static_shapes=True)
def scale_add(x: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    m, n = x.size()
    out = torch.empty_like(x)
    for tile_m, tile_n in hl.tile([m, n]):
        out[tile_m, tile_n] = x[tile_m, tile_n] * 2.0 + b[tile_n]
    return out


def reference(x, b):
    return x * 2.0 + b


def get_inputs():
    return [torch.randn(8, 48), torch.randn(48)]


def get_holdout_inputs():
    return [[torch.randn(13, 48), torch.randn(48)]]
