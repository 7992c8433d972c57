"""relu_chain, plan "compile-fail", first attempt: calls a Triton function that does not exist."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def relu_chain_fancy_kernel(x_ptr, out_ptr, n_elements, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offsets = pid.to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask, other=0.0)
    y = tl.fancy_relu(x * 2.0 + 1.0)
    z = tl.fancy_relu(y * 0.5 - 0.25)
    tl.store(out_ptr + offsets, z, mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        out = torch.empty_like(x)
        n = x.numel()
        block = 2048
        grid = (triton.cdiv(n, block),)
        relu_chain_fancy_kernel[grid](x, out, n, BLOCK=block, num_warps=4)
        return out
