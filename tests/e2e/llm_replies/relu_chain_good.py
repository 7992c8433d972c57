"""relu_chain, plan "good": the whole chain in one fused, wide-block streaming pass."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def relu_chain_fused_kernel(x_ptr, out_ptr, n_elements, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offsets = pid.to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask, other=0.0)
    y = tl.maximum(x * 2.0 + 1.0, 0.0)
    z = tl.maximum(y * 0.5 - 0.25, 0.0)
    tl.store(out_ptr + offsets, z, mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        out = torch.empty_like(x)
        n = x.numel()
        block = 4096
        grid = (triton.cdiv(n, block),)
        relu_chain_fused_kernel[grid](x, out, n, BLOCK=block, num_warps=8)
        return out
