"""The scripted LLM's reply modules: tests/e2e/llm_campaign.py and tests/scripts/test_llm_eval.py.

Every reply is a whole module, as a model sends it: a docstring, the imports, one Triton
kernel and a ``ModelNew`` that launches it.  The kernels differ from reply to reply; the
``ModelNew`` around them is one of a few shapes per problem, so a reply is written here
as its docstring, its kernel and its ``forward`` (built from the shared openings), and
``module`` puts the text together.  The compile-fail, wrong and retry-fix replies are a
problem's good reply with one thing changed (a function that does not exist, a dropped
step, or only another name and docstring): kept as edits (``DERIVED``), the one change
each makes is what a reader sees.  ``reply_source`` gives the text the scripted LLM sends.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_KERNEL = re.compile(r"^def (\w+)\(", re.MULTILINE)
_IMPORTS = "import torch\nimport torch.nn as nn\nimport triton\nimport triton.language as tl\n"
_INIT = "    def __init__(self):\n        super().__init__()\n"
_INIT_NORM = (
    "    def __init__(self, hidden: int):\n"
    "        super().__init__()\n"
    "        self.norm = nn.LayerNorm(hidden, eps=1e-5)\n"
)
# the openings of ``forward``: one input made contiguous, its output, and its sizes
_FLAT = "        x = x.contiguous()\n        out = torch.empty_like(x)\n"
_ROWS = _FLAT + "        n_cols = x.shape[-1]\n        n_rows = x.numel() // n_cols\n"
# the diag_matmul kernels' end: row ``row`` of b, columns ``cols``, times a[row]
_ROW_SCALE = (
    "    mask = cols < n_cols\n"
    "    scale = tl.load(a_ptr + row)\n"
    "    b = tl.load(b_ptr + row * n_cols + cols, mask=mask, other=0.0)\n"
    "    tl.store(out_ptr + row * n_cols + cols, scale * b, mask=mask)\n"
)
_DIAG = (
    "        b = b.contiguous()\n"
    "        out = torch.empty((a.shape[0], b.shape[1]), device=b.device, dtype=b.dtype)\n"
    "        n_rows, n_cols = b.shape\n"
)


def _layernorm_forward(kernel: str, *launch: str) -> str:
    """The layernorm ``forward``: one program per row of the flattened input."""
    args = ("rows", "self.norm.weight", "self.norm.bias", "out", "n_cols", "self.norm.eps")
    lines = "".join(f"            {a},\n" for a in (*args, *launch))
    return (
        "        rows = x.contiguous().view(-1, x.shape[-1])\n"
        "        out = torch.empty_like(rows)\n"
        "        n_rows, n_cols = rows.shape\n"
        f"        {kernel}[(n_rows,)](\n{lines}        )\n"
        "        return out.view_as(x)\n"
    )


@dataclass(frozen=True)
class Written:
    """A reply module written out: docstring, kernel (after ``@triton.jit``), ``forward``."""

    doc: str
    kernel: str
    forward: str
    inputs: str = "x"  # forward's parameters
    init: str = _INIT
    constants: str = ""  # module-level lines between the imports and the kernel

    def module(self) -> str:
        constants = f"\n{self.constants}" if self.constants else ""
        return (
            f'"""{self.doc}"""\n\n{_IMPORTS}{constants}\n\n@triton.jit\n{self.kernel}\n\n'
            f"class ModelNew(nn.Module):\n{self.init}\n"
            f"    def forward(self, {self.inputs}):\n{self.forward}"
        )


WRITTEN: dict[tuple[str, str], Written] = {
    ("relu_chain", "good"): Written(
        'relu_chain, plan "good": the whole chain in one fused, wide-block streaming pass.',
        """\
def relu_chain_fused_kernel(x_ptr, out_ptr, n_elements, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offsets = pid.to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask, other=0.0)
    y = tl.maximum(x * 2.0 + 1.0, 0.0)
    z = tl.maximum(y * 0.5 - 0.25, 0.0)
    tl.store(out_ptr + offsets, z, mask=mask)
""",
        _FLAT
        + """\
        n = x.numel()
        block = 4096
        grid = (triton.cdiv(n, block),)
        relu_chain_fused_kernel[grid](x, out, n, BLOCK=block, num_warps=8)
        return out
""",
    ),
    ("relu_chain", "slower"): Written(
        'relu_chain, plan "slower": correct, but one single-warp program per row walking 32 columns at a time.',
        """\
def relu_chain_rowloop_kernel(x_ptr, out_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    base = row * n_cols
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = cols < n_cols
        x = tl.load(x_ptr + base + cols, mask=mask, other=0.0)
        y = tl.maximum(x * 2.0 + 1.0, 0.0)
        z = tl.maximum(y * 0.5 - 0.25, 0.0)
        tl.store(out_ptr + base + cols, z, mask=mask)
""",
        _ROWS
        + """\
        relu_chain_rowloop_kernel[(n_rows,)](x, out, n_cols, BLOCK=32, num_warps=1, num_stages=1)
        return out
""",
    ),
    ("softmax_rows", "good"): Written(
        'softmax_rows, plan "good": one program per row, the whole row in registers, one read and one write.',
        """\
def softmax_row_kernel(x_ptr, out_ptr, n_cols, row_stride, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * row_stride + cols, mask=mask, other=-float("inf"))
    row_max = tl.max(x, axis=0)
    e = tl.exp(x - row_max)
    e = tl.where(mask, e, 0.0)
    denom = tl.sum(e, axis=0)
    tl.store(out_ptr + row * row_stride + cols, e / denom, mask=mask)
""",
        _ROWS
        + """\
        block = triton.next_power_of_2(n_cols)
        warps = 16 if block >= 8192 else 8 if block >= 2048 else 4
        softmax_row_kernel[(n_rows,)](x, out, n_cols, n_cols, BLOCK=block, num_warps=warps)
        return out
""",
    ),
    ("softmax_rows", "slower"): Written(
        'softmax_rows, plan "slower": correct, but three passes over each row, 32 columns at a time, one warp.',
        """\
def softmax_three_pass_kernel(x_ptr, out_ptr, n_cols, row_stride, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    base = row * row_stride
    run_max = tl.full([BLOCK], -float("inf"), tl.float32)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + base + cols, mask=cols < n_cols, other=-float("inf"))
        run_max = tl.maximum(run_max, x)
    row_max = tl.max(run_max, axis=0)
    run_sum = tl.zeros([BLOCK], tl.float32)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = cols < n_cols
        x = tl.load(x_ptr + base + cols, mask=mask, other=-float("inf"))
        run_sum += tl.where(mask, tl.exp(x - row_max), 0.0)
    denom = tl.sum(run_sum, axis=0)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = cols < n_cols
        x = tl.load(x_ptr + base + cols, mask=mask, other=0.0)
        tl.store(out_ptr + base + cols, tl.exp(x - row_max) / denom, mask=mask)
""",
        _ROWS
        + """\
        softmax_three_pass_kernel[(n_rows,)](
            x, out, n_cols, n_cols, BLOCK=32, num_warps=1, num_stages=1
        )
        return out
""",
    ),
    ("layernorm", "good"): Written(
        'layernorm, plan "good": one program per row, the row in registers, mean and variance in two in-register passes, one read and one write.',
        """\
def layernorm_row_kernel(x_ptr, w_ptr, b_ptr, out_ptr, n_cols, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * n_cols + cols, mask=mask, other=0.0)
    mean = tl.sum(x, axis=0) / n_cols
    centered = tl.where(mask, x - mean, 0.0)
    var = tl.sum(centered * centered, axis=0) / n_cols
    w = tl.load(w_ptr + cols, mask=mask, other=0.0)
    b = tl.load(b_ptr + cols, mask=mask, other=0.0)
    y = centered * tl.rsqrt(var + eps) * w + b
    tl.store(out_ptr + row * n_cols + cols, y, mask=mask)
""",
        _layernorm_forward(
            "layernorm_row_kernel", "BLOCK=triton.next_power_of_2(n_cols)", "num_warps=8"
        ),
        init=_INIT_NORM,
    ),
    ("layernorm", "slower"): Written(
        'layernorm, plan "slower": correct, but three passes over each row, 32 columns at a time, one warp.',
        """\
def layernorm_three_pass_kernel(x_ptr, w_ptr, b_ptr, out_ptr, n_cols, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    base = row * n_cols
    acc = tl.zeros([BLOCK], tl.float32)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        acc += tl.load(x_ptr + base + cols, mask=cols < n_cols, other=0.0)
    mean = tl.sum(acc, axis=0) / n_cols
    acc = tl.zeros([BLOCK], tl.float32)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = cols < n_cols
        x = tl.load(x_ptr + base + cols, mask=mask, other=0.0)
        d = tl.where(mask, x - mean, 0.0)
        acc += d * d
    rstd = tl.rsqrt(tl.sum(acc, axis=0) / n_cols + eps)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = cols < n_cols
        x = tl.load(x_ptr + base + cols, mask=mask, other=0.0)
        w = tl.load(w_ptr + cols, mask=mask, other=0.0)
        b = tl.load(b_ptr + cols, mask=mask, other=0.0)
        tl.store(out_ptr + base + cols, (x - mean) * rstd * w + b, mask=mask)
""",
        _layernorm_forward(
            "layernorm_three_pass_kernel", "BLOCK=32", "num_warps=1", "num_stages=1"
        ),
        init=_INIT_NORM,
    ),
    ("diag_matmul", "good"): Written(
        'diag_matmul, plan "good": diag(a) @ b is a row scaling; one read of b, one write, no GEMM.',
        """\
def diag_rowscale_kernel(a_ptr, b_ptr, out_ptr, n_rows, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
"""
        + _ROW_SCALE,
        _DIAG
        + """\
        grid = (n_rows, triton.cdiv(n_cols, 1024))
        diag_rowscale_kernel[grid](a, b, out, n_rows, n_cols, BLOCK=1024, num_warps=4)
        return out
""",
        inputs="a, b",
    ),
    ("diag_matmul", "slower"): Written(
        'diag_matmul, plan "slower": correct, but diag(a) materialised and multiplied densely (fp32 FMA GEMM, no tensor cores).',
        """\
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
""",
        """\
        b = b.contiguous()
        d = torch.diag(a).contiguous()
        n, m = b.shape
        out = torch.empty((n, m), device=b.device, dtype=b.dtype)
        grid = (triton.cdiv(n, 64), triton.cdiv(m, 64))
        diag_dense_gemm_kernel[grid](d, b, out, n, m, BM=64, BN=64, BK=32, num_warps=4)
        return out
""",
        inputs="a, b",
    ),
    ("diag_matmul", "dispatch"): Written(
        """diag_matmul, plan "dispatch": the row-scale kernel, launched over a tile list built in Python.

Scripted for gate 4's case (docs/method.md#gates): the kernel itself replays dozens
of times faster than Inductor's GEMM from a CUDA graph, but forward() enumerates
every (row, column block) tile on the host on each call -- 262,144 tuples, some
10-20 ms of Python -- so the model as dispatched is slower than the baseline.
""",
        """\
def diag_tile_kernel(a_ptr, b_ptr, out_ptr, n_cols, n_col_blocks, BLOCK: tl.constexpr):
    tile = tl.program_id(0).to(tl.int64)
    row = tile // n_col_blocks
    cols = (tile % n_col_blocks) * BLOCK + tl.arange(0, BLOCK)
"""
        + _ROW_SCALE,
        _DIAG
        + """\
        tiles = [(row, col) for row in range(n_rows) for col in range(0, n_cols, BLOCK)]
        n_col_blocks = triton.cdiv(n_cols, BLOCK)
        diag_tile_kernel[(len(tiles),)](a, b, out, n_cols, n_col_blocks, BLOCK=BLOCK, num_warps=2)
        return out
""",
        inputs="a, b",
        constants="BLOCK = 64\n",
    ),
}
TAGS = tuple(sorted({tag for tag, _ in WRITTEN}))  # the problems that have scripted replies

# (problem tag, reply name) -> (kernel name, ((old, new), ...)): the good module with
# its kernel renamed, then each ``old`` (found exactly once) replaced by ``new``.
DERIVED: dict[tuple[str, str], tuple[str, tuple[tuple[str, str], ...]]] = {
    ("relu_chain", "compile_fail"): (
        "relu_chain_fancy_kernel",
        (
            (
                '"""relu_chain, plan "good": the whole chain in one fused, wide-block streaming pass."""\n',
                '"""relu_chain, plan "compile-fail", first attempt: calls a Triton function that does not exist."""\n',
            ),
            (
                "    y = tl.maximum(x * 2.0 + 1.0, 0.0)\n    z = tl.maximum(y * 0.5 - 0.25, 0.0)\n",
                "    y = tl.fancy_relu(x * 2.0 + 1.0)\n    z = tl.fancy_relu(y * 0.5 - 0.25)\n",
            ),
            ("        block = 4096\n", "        block = 2048\n"),
            (
                "        relu_chain_fancy_kernel[grid](x, out, n, BLOCK=block, num_warps=8)\n",
                "        relu_chain_fancy_kernel[grid](x, out, n, BLOCK=block, num_warps=4)\n",
            ),
        ),
    ),
    ("relu_chain", "fixed"): (
        "relu_chain_fixed_kernel",
        (
            (
                '"""relu_chain, plan "good": the whole chain in one fused, wide-block streaming pass."""\n',
                '"""relu_chain, plan "compile-fail", retry: the nonexistent call replaced by tl.maximum."""\n',
            ),
            ("        block = 4096\n", "        block = 2048\n"),
            (
                "        relu_chain_fixed_kernel[grid](x, out, n, BLOCK=block, num_warps=8)\n",
                "        relu_chain_fixed_kernel[grid](x, out, n, BLOCK=block, num_warps=4)\n",
            ),
        ),
    ),
    ("relu_chain", "wrong"): (
        "relu_chain_norelu_kernel",
        (
            (
                '"""relu_chain, plan "good": the whole chain in one fused, wide-block streaming pass."""\n',
                '"""relu_chain, plan "wrong", first attempt: forgets the final relu (negative outputs survive)."""\n',
            ),
            ("    z = tl.maximum(y * 0.5 - 0.25, 0.0)\n", "    z = y * 0.5 - 0.25\n"),
            ("        block = 4096\n", "        block = 1024\n"),
            (
                "        relu_chain_norelu_kernel[grid](x, out, n, BLOCK=block, num_warps=8)\n",
                "        relu_chain_norelu_kernel[grid](x, out, n, BLOCK=block, num_warps=4)\n",
            ),
        ),
    ),
    ("relu_chain", "wrong_fixed"): (
        "relu_chain_both_relus_kernel",
        (
            (
                '"""relu_chain, plan "good": the whole chain in one fused, wide-block streaming pass."""\n',
                '"""relu_chain, plan "wrong", retry: the final relu restored."""\n',
            ),
            ("        block = 4096\n", "        block = 1024\n"),
            (
                "        relu_chain_both_relus_kernel[grid](x, out, n, BLOCK=block, num_warps=8)\n",
                "        relu_chain_both_relus_kernel[grid](x, out, n, BLOCK=block, num_warps=4)\n",
            ),
        ),
    ),
    ("softmax_rows", "compile_fail"): (
        "softmax_fancy_kernel",
        (
            (
                '"""softmax_rows, plan "good": one program per row, the whole row in registers, one read and one write."""\n',
                '"""softmax_rows, plan "compile-fail", first attempt: calls a Triton function that does not exist."""\n',
            ),
            ("    e = tl.exp(x - row_max)\n", "    e = tl.fancy_exp(x - row_max)\n"),
            (
                "        warps = 16 if block >= 8192 else 8 if block >= 2048 else 4\n        softmax_fancy_kernel[(n_rows,)](x, out, n_cols, n_cols, BLOCK=block, num_warps=warps)\n",
                "        softmax_fancy_kernel[(n_rows,)](x, out, n_cols, n_cols, BLOCK=block, num_warps=8)\n",
            ),
        ),
    ),
    ("softmax_rows", "fixed"): (
        "softmax_fixed_kernel",
        (
            (
                '"""softmax_rows, plan "good": one program per row, the whole row in registers, one read and one write."""\n',
                '"""softmax_rows, plan "compile-fail", retry: tl.exp instead of the nonexistent function."""\n',
            ),
            (
                "        warps = 16 if block >= 8192 else 8 if block >= 2048 else 4\n        softmax_fixed_kernel[(n_rows,)](x, out, n_cols, n_cols, BLOCK=block, num_warps=warps)\n",
                "        softmax_fixed_kernel[(n_rows,)](x, out, n_cols, n_cols, BLOCK=block, num_warps=8)\n",
            ),
        ),
    ),
    ("softmax_rows", "wrong"): (
        "softmax_unnormalised_kernel",
        (
            (
                '"""softmax_rows, plan "good": one program per row, the whole row in registers, one read and one write."""\n',
                '"""softmax_rows, plan "wrong", first attempt: forgets to divide by the row sum."""\n',
            ),
            (
                "    e = tl.where(mask, e, 0.0)\n    denom = tl.sum(e, axis=0)\n    tl.store(out_ptr + row * row_stride + cols, e / denom, mask=mask)\n",
                "    tl.store(out_ptr + row * row_stride + cols, e, mask=mask)\n",
            ),
            (
                "        warps = 16 if block >= 8192 else 8 if block >= 2048 else 4\n        softmax_unnormalised_kernel[(n_rows,)](x, out, n_cols, n_cols, BLOCK=block, num_warps=warps)\n",
                "        softmax_unnormalised_kernel[(n_rows,)](x, out, n_cols, n_cols, BLOCK=block, num_warps=4)\n",
            ),
        ),
    ),
    ("softmax_rows", "wrong_fixed"): (
        "softmax_normalised_kernel",
        (
            (
                '"""softmax_rows, plan "good": one program per row, the whole row in registers, one read and one write."""\n',
                '"""softmax_rows, plan "wrong", retry: the division by the row sum restored."""\n',
            ),
            (
                "        warps = 16 if block >= 8192 else 8 if block >= 2048 else 4\n        softmax_normalised_kernel[(n_rows,)](x, out, n_cols, n_cols, BLOCK=block, num_warps=warps)\n",
                "        softmax_normalised_kernel[(n_rows,)](x, out, n_cols, n_cols, BLOCK=block, num_warps=4)\n",
            ),
        ),
    ),
    ("layernorm", "compile_fail"): (
        "layernorm_fancy_kernel",
        (
            (
                '"""layernorm, plan "good": one program per row, the row in registers, mean and variance in two in-register passes, one read and one write."""\n',
                '"""layernorm, plan "compile-fail", first attempt: calls a Triton function that does not exist."""\n',
            ),
            (
                "    y = centered * tl.rsqrt(var + eps) * w + b\n",
                "    y = centered * tl.fancy_rsqrt(var + eps) * w + b\n",
            ),
        ),
    ),
    ("layernorm", "fixed"): (
        "layernorm_fixed_kernel",
        (
            (
                '"""layernorm, plan "good": one program per row, the row in registers, mean and variance in two in-register passes, one read and one write."""\n',
                '"""layernorm, plan "compile-fail", retry-fix reply: tl.rsqrt instead of the invented function."""\n',
            ),
        ),
    ),
    ("layernorm", "wrong"): (
        "layernorm_nobias_kernel",
        (
            (
                '"""layernorm, plan "good": one program per row, the row in registers, mean and variance in two in-register passes, one read and one write."""\n',
                '"""layernorm, plan "wrong", first attempt: forgets to add the bias."""\n',
            ),
            (
                "    b = tl.load(b_ptr + cols, mask=mask, other=0.0)\n    y = centered * tl.rsqrt(var + eps) * w + b\n",
                "    y = centered * tl.rsqrt(var + eps) * w\n",
            ),
        ),
    ),
    ("layernorm", "wrong_fixed"): (
        "layernorm_affine_kernel",
        (
            (
                '"""layernorm, plan "good": one program per row, the row in registers, mean and variance in two in-register passes, one read and one write."""\n',
                '"""layernorm, plan "wrong", retry-fix reply: the bias restored."""\n',
            ),
        ),
    ),
    ("diag_matmul", "compile_fail"): (
        "diag_fancy_kernel",
        (
            (
                '"""diag_matmul, plan "good": diag(a) @ b is a row scaling; one read of b, one write, no GEMM."""\n',
                '"""diag_matmul, plan "compile-fail", first attempt: calls a Triton function that does not exist."""\n',
            ),
            (
                "    tl.store(out_ptr + row * n_cols + cols, scale * b, mask=mask)\n",
                "    tl.store(out_ptr + row * n_cols + cols, tl.fancy_scale(b, scale), mask=mask)\n",
            ),
        ),
    ),
    ("diag_matmul", "fixed"): (
        "diag_fixed_kernel",
        (
            (
                '"""diag_matmul, plan "good": diag(a) @ b is a row scaling; one read of b, one write, no GEMM."""\n',
                '"""diag_matmul, plan "compile-fail", retry-fix reply: the scaling written as a plain product."""\n',
            ),
        ),
    ),
    ("diag_matmul", "wrong"): (
        "diag_rowadd_kernel",
        (
            (
                '"""diag_matmul, plan "good": diag(a) @ b is a row scaling; one read of b, one write, no GEMM."""\n',
                '"""diag_matmul, plan "wrong", first attempt: adds the diagonal entry instead of multiplying by it."""\n',
            ),
            (
                "    tl.store(out_ptr + row * n_cols + cols, scale * b, mask=mask)\n",
                "    tl.store(out_ptr + row * n_cols + cols, scale + b, mask=mask)\n",
            ),
        ),
    ),
    ("diag_matmul", "wrong_fixed"): (
        "diag_rowmul_kernel",
        (
            (
                '"""diag_matmul, plan "good": diag(a) @ b is a row scaling; one read of b, one write, no GEMM."""\n',
                '"""diag_matmul, plan "wrong", retry-fix reply: the product restored."""\n',
            ),
        ),
    ),
}


def reply_source(tag: str, name: str) -> str:
    """The text of reply ``<tag>_<name>``: written out (``WRITTEN``), or derived from the
    problem's good reply by its edits (``DERIVED``)."""
    if (tag, name) in WRITTEN:
        return WRITTEN[(tag, name)].module()
    kernel, edits = DERIVED[(tag, name)]
    good = WRITTEN[(tag, "good")].module()
    match = _KERNEL.search(good)
    if match is None:
        raise ValueError(f"{tag}'s good reply defines no kernel")
    text = good.replace(match.group(1), kernel)
    for old, new in edits:
        if text.count(old) != 1:
            raise ValueError(f"{tag}_{name}: edit {old[:40]!r} does not match exactly once")
        text = text.replace(old, new, 1)
    return text


def has_reply(tag: str, name: str) -> bool:
    return (tag, name) in WRITTEN or (tag, name) in DERIVED
