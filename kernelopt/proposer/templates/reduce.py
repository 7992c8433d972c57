"""Single-axis sum / mean / amax / amin template (multi-row, split-row or strided-axis)."""

from __future__ import annotations

from kernelopt.proposer.templates.base import (
    FLOAT_DTYPES,
    MAX_TILE,
    KernelView,
    Template,
    TemplateMatch,
    contiguous,
    dtype_name,
    rank_by_prior,
    reduced_axis,
    row_tiles,
    strided_tiles,
)

_OPS = {
    "sum": ("sum", False),
    "mean": ("sum", True),
    "amax": ("max", False),
    "amin": ("min", False),
}


class ReduceTemplate(Template):
    """A kernel whose only op is one reduction over one axis of a dense float input."""

    name = "reduce"
    kernel_file = "k_reduce.py"

    def match(self, view: KernelView) -> TemplateMatch | None:
        ops = view.fragment.op_counts()
        if len(ops) != 1 or next(iter(ops)) not in _OPS or sum(ops.values()) != 1:
            return None
        node = view.fragment.calls()[0]
        op, mean = _OPS[node.short]
        x = view.arg_for(node.args[0] if node.args else None)
        x_node = view.node(node.args[0] if node.args else None)
        out = view.only_output()
        if x is None or x_node is None or x_node.shape is None or out is None:
            return None
        if "dtype" in node.kwargs or len(view.tensor_args("in")) != 1:
            return None  # an accumulation dtype we do not model
        axis = reduced_axis(node.args[1] if len(node.args) > 1 else None, len(x_node.shape))
        y_spec = view.args[out].tensor
        if (
            axis is None
            or y_spec is None
            or view.stored_node(out) is not node
            or not contiguous(x_node.shape, x_node.stride)
            or not contiguous(y_spec.shape, y_spec.stride)
            or dtype_name(x_node.dtype) not in FLOAT_DTYPES
            or y_spec.dtype not in FLOAT_DTYPES
        ):
            return None
        outer = _numel(x_node.shape[:axis])
        inner = _numel(x_node.shape[axis + 1 :])
        return TemplateMatch(
            template=self.name,
            args={"x": x, "y": out},
            consts={
                "outer": outer,
                "n_red": x_node.shape[axis],
                "inner": inner,
                "op": op,
                "mean": mean,
            },
            what=f"{node.short} over an axis of {x_node.shape[axis]} (outer {outer}, inner {inner})",
        )

    def grid(self, match: TemplateMatch, sm_count: int) -> list[dict[str, int]]:
        c = match.consts
        outer, n_red, inner = c["outer"], c["n_red"], c["inner"]
        if inner > 1:  # strided axis: tiles of [BLOCK (reduced), BLOCK_K (contiguous)]
            return strided_tiles(outer, n_red, inner, sm_count, per_thread=64, cap_block=False)
        blocks = (64, 128, 256, 512, 1024, 2048, 4096)
        points = [
            {**p, "SPLIT": 1}
            for p in row_tiles(outer, n_red, blocks, max_tile=MAX_TILE, per_thread=64)
        ]
        if outer < 4 * sm_count and n_red >= 4096:  # few long rows: split them
            for split in (4, 8, 16, 32, 64):
                if n_red // split >= 512:
                    for block in (512, 1024, 2048):
                        for warps in (4, 8):
                            points.append(
                                {"ROWS": 1, "BLOCK": block, "SPLIT": split, "num_warps": warps}
                            )
        return rank_by_prior(
            points,
            tile=lambda p: p["ROWS"] * p["BLOCK"],
            programs=lambda p: -(-outer // p["ROWS"]) * p["SPLIT"],
            sm_count=sm_count,
        )

    def call(self, match: TemplateMatch, params: dict[str, int]) -> str:
        a, c = match.args, match.consts
        knobs = ", ".join(f"{k}={params[k]}" for k in sorted(params))
        return (
            f"ko_reduce(args[{a['x']}], args[{a['y']}], {c['outer']}, {c['n_red']}, "
            f"{c['inner']}, {c['op']!r}, {c['mean']}, {knobs})"
        )


def _numel(shape: list[int]) -> int:
    n = 1
    for s in shape:
        n *= s
    return n
