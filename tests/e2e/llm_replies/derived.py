"""Reply modules written as small edits of each problem's ``<tag>_good.py``.

The compile-fail, wrong and retry-fix replies of a problem are its good kernel with
one thing changed: a function that does not exist, a dropped step, or only another
name and docstring.  Kept as edits, the shared kernel is written once and the one
change each reply makes is what a reader sees.  ``reply_source`` rebuilds the module
text the scripted LLM sends.
"""

from __future__ import annotations

import re
from pathlib import Path

HERE = Path(__file__).resolve().parent
_KERNEL = re.compile(r"^def (\w+)\(", re.MULTILINE)

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
    """The text of reply module ``<tag>_<name>``: a file of its own, or derived from
    ``<tag>_good.py`` by its edits."""
    path = HERE / f"{tag}_{name}.py"
    if path.is_file():
        return path.read_text()
    kernel, edits = DERIVED[(tag, name)]
    good = (HERE / f"{tag}_good.py").read_text()
    match = _KERNEL.search(good)
    if match is None:
        raise ValueError(f"{tag}_good.py defines no kernel")
    text = good.replace(match.group(1), kernel)
    for old, new in edits:
        if text.count(old) != 1:
            raise ValueError(f"{tag}_{name}: edit {old[:40]!r} does not match exactly once")
        text = text.replace(old, new, 1)
    return text


def has_reply(tag: str, name: str) -> bool:
    return (HERE / f"{tag}_{name}.py").is_file() or (tag, name) in DERIVED
