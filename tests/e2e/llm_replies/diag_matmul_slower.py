"""diag_matmul, plan "slower": correct, but diag(a) materialised and multiplied densely (fp32 FMA GEMM, no tensor cores)."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def diag_dense_gemm_kernel(
    d_ptr, b_ptr, out_ptr, n, m, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr
):
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    acc = tl.zeros([BM, BN], tl.float32)
    for k0 in range(0, n, BK):
        rk = k0 + tl.arange(0, BK)
        d_mask = (rm[:, None] < n) & (rk[None, :] < n)
        b_mask = (rk[:, None] < n) & (rn[None, :] < m)
        d = tl.load(d_ptr + rm[:, None] * n + rk[None, :], mask=d_mask, other=0.0)
        b = tl.load(b_ptr + rk[:, None] * m + rn[None, :], mask=b_mask, other=0.0)
        acc += tl.dot(d, b, input_precision="ieee")
    out_mask = (rm[:, None] < n) & (rn[None, :] < m)
    tl.store(out_ptr + rm[:, None] * m + rn[None, :], acc, mask=out_mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        b = b.contiguous()
        d = torch.diag(a).contiguous()
        n, m = b.shape
        out = torch.empty((n, m), device=b.device, dtype=b.dtype)
        grid = (triton.cdiv(n, 64), triton.cdiv(m, 64))
        diag_dense_gemm_kernel[grid](d, b, out, n, m, BM=64, BN=64, BK=32, num_warps=4)
        return out
