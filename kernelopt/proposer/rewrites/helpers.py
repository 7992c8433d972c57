"""Functions a rewritten forward may call; their source is written into the candidate file.

A candidate must stand alone (the gate children import nothing of kernelopt for it),
so ``model_new_source`` copies the source of each helper the rewritten graph calls.
Each helper works for any shape its operation accepts, and falls back to the plain
operation where its structure does not apply (the held-out shapes may differ).
"""

from __future__ import annotations

import torch

# below this size a triangular block is multiplied densely: a GEMM this large runs near
# the device's peak, and splitting it further saves FLOPs that no longer cost much time
TRIANGULAR_LEAF = 1024


def _ko_triangular_product(a: torch.Tensor, b: torch.Tensor, lower: bool, leaf: int):
    """``a @ b`` for square triangular ``a`` and ``b`` (both lower or both upper).

    The product is triangular too, and on 2x2 blocks (lower case) it is
    ``[[a11 b11, 0], [a21 b11 + a22 b21, a22 b22]]``: the diagonal blocks are again
    triangular products, the off-diagonal one is one GEMM over a row band of ``a`` and a
    column band of ``b``, and the zero block is never computed.  Recursing down to
    ``leaf`` does about three eighths of the dense FLOPs at two levels.
    """
    n = a.shape[-1]
    if (
        a.dim() < 2
        or b.dim() < 2
        or n <= leaf
        or not (a.shape[-2] == n == b.shape[-2] == b.shape[-1])
    ):
        return a @ b
    h = n // 2
    batch = torch.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    out = a.new_zeros((*batch, n, n), dtype=torch.result_type(a, b))
    out[..., :h, :h] = _ko_triangular_product(a[..., :h, :h], b[..., :h, :h], lower, leaf)
    out[..., h:, h:] = _ko_triangular_product(a[..., h:, h:], b[..., h:, h:], lower, leaf)
    if lower:
        out[..., h:, :h] = a[..., h:, :] @ b[..., :, :h]
    else:
        out[..., :h, h:] = a[..., :h, :] @ b[..., :, h:]
    return out


def _ko_masked_product(x: torch.Tensor, y: torch.Tensor, lower: bool, leaf: int):
    """``tril(x @ y)`` (``triu`` when not ``lower``) without the output blocks the mask drops.

    On 2x2 output blocks (lower case) the top-right block is never computed, the
    bottom-left one is a full GEMM, and the two diagonal blocks are masked products of
    a row band of ``x`` and a column band of ``y`` again: five eighths of the dense FLOPs
    at two levels, towards half with more.
    """
    mask = torch.tril if lower else torch.triu
    m, n = x.shape[-2] if x.dim() >= 2 else 0, y.shape[-1] if y.dim() >= 2 else 0
    if x.dim() < 2 or y.dim() < 2 or m != n or n <= leaf:
        return mask(x @ y)
    h = n // 2
    top, bottom = x[..., :h, :], x[..., h:, :]
    left, right = y[..., :, :h], y[..., :, h:]
    batch = torch.broadcast_shapes(x.shape[:-2], y.shape[:-2])
    out = x.new_zeros((*batch, n, n), dtype=torch.result_type(x, y))
    out[..., :h, :h] = _ko_masked_product(top, left, lower, leaf)
    out[..., h:, h:] = _ko_masked_product(bottom, right, lower, leaf)
    if lower:
        out[..., h:, :h] = bottom @ left
    else:
        out[..., :h, h:] = top @ right
    return out


def _ko_triangular_times_dense(a: torch.Tensor, b: torch.Tensor, lower: bool, leaf: int):
    """``a @ b`` for square triangular ``a`` and any ``b``: on 2x2 blocks of ``a`` (lower
    case) the top rows are ``a11 b1`` and the bottom rows ``a21 b1 + a22 b2``, so the zero
    block is skipped and the diagonal blocks recurse: five eighths of the dense FLOPs at
    two levels, towards half with more."""
    n = a.shape[-1]
    if a.dim() < 2 or b.dim() < 2 or n <= leaf or a.shape[-2] != n or b.shape[-2] != n:
        return a @ b
    h = n // 2
    top = _ko_triangular_times_dense(a[..., :h, :h], b[..., :h, :], lower, leaf)
    bottom = _ko_triangular_times_dense(a[..., h:, h:], b[..., h:, :], lower, leaf)
    # the recursion's results are fresh tensors: the off-diagonal product adds into them in
    # place, inside the GEMM (addmm) where both are plain matrices
    rows, x, y = (
        (bottom, a[..., h:, :h], b[..., :h, :]) if lower else (top, a[..., :h, h:], b[..., h:, :])
    )
    if rows.dim() == x.dim() == y.dim() == 2:
        rows.addmm_(x, y)
    else:
        rows += x @ y
    return torch.cat([top, bottom], dim=-2)


def _ko_dense_times_triangular(x: torch.Tensor, b: torch.Tensor, lower: bool, leaf: int):
    """``x @ b`` for any ``x`` and square triangular ``b``: the column-block mirror of
    ``_ko_triangular_times_dense``."""
    n = b.shape[-1]
    if x.dim() < 2 or b.dim() < 2 or n <= leaf or b.shape[-2] != n or x.shape[-1] != n:
        return x @ b
    h = n // 2
    left = _ko_dense_times_triangular(x[..., :, :h], b[..., :h, :h], lower, leaf)
    right = _ko_dense_times_triangular(x[..., :, h:], b[..., h:, h:], lower, leaf)
    cols, u, v = (
        (left, x[..., :, h:], b[..., h:, :h]) if lower else (right, x[..., :, :h], b[..., :h, h:])
    )
    if cols.dim() == u.dim() == v.dim() == 2:
        cols.addmm_(u, v)
    else:
        cols += u @ v
    return torch.cat([left, right], dim=-1)


HELPERS = (
    _ko_triangular_product,
    _ko_masked_product,
    _ko_triangular_times_dense,
    _ko_dense_times_triangular,
)
