"""What every expert template shares: the view of a target, a match, rendering a candidate.

A template is a Triton kernel we wrote for one op family plus a matcher that
recognises that family in the target's ATen graph fragment.  A match binds the
kernel's launch arguments (by position in ``name.run(...)``) to the template's
roles and records the structural constants (row length, eps, which op); the
candidate is the kernel module's own text (the shared tiles of ``k_tiles.py``
written in) followed by a ``launch(*args)`` that calls it -- the candidate
contract's launch form.  The first line carries the
match and the parameters as JSON, so a later round can walk the template's
grid from a template state.
"""

from __future__ import annotations

import ast
import json
import math
import re
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from kernelopt.contracts.compiled import KernelArg, TensorSpec
from kernelopt.proposer.fragment import Fragment, FxNode, Ref

HEADER = "# kernelopt template: "
FLOAT_DTYPES = ("float32", "float16", "bfloat16")
_SHORT_DTYPES = {
    "f32": "float32",
    "f16": "float16",
    "bf16": "bfloat16",
    "f64": "float64",
    "i64": "int64",
    "i32": "int32",
    "b8": "bool",
}
MAX_TILE = 8192  # elements a program holds in registers at once
_HERE = Path(__file__).parent
_SHARED_IMPORT = re.compile(r"^from kernelopt\.proposer\.templates\.(k_\w+) import (.*)$", re.M)


@dataclass
class KernelView:
    """One Inductor kernel as a template sees it: its ATen fragment and its launch arguments."""

    name: str
    fragment: Fragment
    args: list[KernelArg]
    sm_count: int = 132

    def tensor_args(self, role: str) -> list[int]:
        return [i for i, a in enumerate(self.args) if a.role == role and a.tensor is not None]

    def arg_for(self, ref: Any) -> int | None:
        """The launch argument a fragment ``Ref`` to a placeholder stands for."""
        if not isinstance(ref, Ref):
            return None
        for i, a in enumerate(self.args):
            node = self.fragment.placeholder_for(a.expr)
            if (
                a.role == "in"
                and a.tensor is not None
                and node is not None
                and node.name == ref.name
            ):
                return i
        return None

    def node(self, ref: Any) -> FxNode | None:
        if not isinstance(ref, Ref):
            return None
        return next((n for n in self.fragment.nodes if n.name == ref.name), None)

    def only_output(self) -> int | None:
        """The single output tensor (no in-place outputs), else None."""
        outs = self.tensor_args("out")
        if len(outs) != 1 or self.tensor_args("inout"):
            return None
        return outs[0]

    def stored_node(self, out: int) -> FxNode | None:
        """The returned node whose value the output tensor holds (dtype and size agree)."""
        spec = self.args[out].tensor
        if spec is None:
            return None
        hits = [
            n
            for n in self.fragment.returned_calls()
            if dtype_name(n.dtype) == spec.dtype
            and n.shape is not None
            and math.prod(n.shape) == math.prod(spec.shape)
        ]
        return hits[0] if len(hits) == 1 else None


def dtype_name(short: str) -> str:
    return _SHORT_DTYPES.get(short, short)


def contiguous(shape: list[int] | None, stride: list[int] | None) -> bool:
    """Row-major dense (size-1 dimensions may carry any stride)."""
    if shape is None or stride is None or len(shape) != len(stride):
        return False
    expected = 1
    for size, st in zip(reversed(shape), reversed(stride), strict=True):
        if size != 1 and st != expected:
            return False
        expected *= size
    return True


def dense_io(x_node: FxNode, y_spec: TensorSpec | None, *, float_out: bool = True) -> bool:
    """A row-major float input and a row-major output, of floats too unless it holds indices.

    Every template's kernel indexes both as dense rows and loads the input as floats.
    """
    return (
        y_spec is not None
        and contiguous(x_node.shape, x_node.stride)
        and contiguous(y_spec.shape, y_spec.stride)
        and dtype_name(x_node.dtype) in FLOAT_DTYPES
        and (not float_out or y_spec.dtype in FLOAT_DTYPES)
    )


def reduced_axis(dims: Any, rank: int) -> int | None:
    """One reduction axis, normalised; None for several axes or none."""
    if isinstance(dims, list):
        if len(dims) != 1:
            return None
        dims = dims[0]
    if not isinstance(dims, int) or rank == 0 or not -rank <= dims < rank:
        return None
    return dims % rank


def next_pow2(n: int) -> int:
    return 1 << max(0, (n - 1).bit_length())


@dataclass
class TemplateMatch:
    """A template bound to one target: argument positions and structural constants."""

    template: str
    args: dict[str, int]
    consts: dict[str, Any] = field(default_factory=dict)
    what: str = ""


def label(name: str, params: dict[str, int]) -> str:
    inner = ",".join(f"{k}={params[k]}" for k in sorted(params))
    return f"template:{name}:{inner}"


class Template(ABC):
    """One op family: recognise it, list its parameter grid, write a candidate."""

    name: ClassVar[str]
    kernel_file: ClassVar[str]  # a k_*.py next to this module: read as text, never imported

    @abstractmethod
    def match(self, view: KernelView) -> TemplateMatch | None:
        """The binding when ``view`` computes this template's op family, else None."""

    @abstractmethod
    def grid(self, match: TemplateMatch, sm_count: int) -> list[dict[str, int]]:
        """The parameter points worth trying, most promising first."""

    @abstractmethod
    def call(self, match: TemplateMatch, params: dict[str, int]) -> str:
        """The body of ``launch(*args)``: one call of the kernel module's host function."""

    def render(self, match: TemplateMatch, params: dict[str, int]) -> str:
        """The complete candidate module (launch form of the candidate contract)."""
        meta = json.dumps(
            {"template": self.name, "args": match.args, "consts": match.consts, "params": params},
            sort_keys=True,
        )
        kernels = kernel_text(self.kernel_file)
        return (
            f"{HEADER}{meta}\n"
            f"# {match.what}; parameters {label(self.name, params)}\n"
            f"{kernels}\n\n"
            "def launch(*args):\n"
            f"    {self.call(match, params)}\n"
        )


def kernel_text(kernel_file: str) -> str:
    """A ``k_*.py``'s text with each import from another ``k_*.py`` replaced by the imported
    definitions: the shared tiles are written once, yet a candidate stands alone."""
    text = (_HERE / kernel_file).read_text(encoding="utf-8")
    return _SHARED_IMPORT.sub(
        lambda m: _definitions(f"{m.group(1)}.py", m.group(2).split(",")), text
    )


def _definitions(kernel_file: str, names: list[str]) -> str:
    """The text of the named top-level functions of a shared ``k_*.py``, decorators included."""
    lines = (_HERE / kernel_file).read_text(encoding="utf-8").splitlines()
    found = {
        node.name: "\n".join(lines[node.decorator_list[0].lineno - 1 : node.end_lineno])
        for node in ast.parse("\n".join(lines)).body
        if isinstance(node, ast.FunctionDef) and node.decorator_list
    }
    return "\n\n\n".join(found[name.strip()] for name in names)


def read_header(source: str) -> tuple[TemplateMatch, dict[str, int]] | None:
    """The match and parameters of a template candidate, from its first line."""
    first = source.split("\n", 1)[0]
    if not first.startswith(HEADER):
        return None
    try:
        meta = json.loads(first[len(HEADER) :])
        match = TemplateMatch(template=meta["template"], args=meta["args"], consts=meta["consts"])
        return match, dict(meta["params"])
    except (ValueError, KeyError, TypeError):
        return None


def rank_by_prior(
    points: list[dict[str, int]], tile: Any, programs: Any, sm_count: int, extra: Any = None
) -> list:
    """Order grid points: ~16 elements per thread and a grid that fills every SM first
    (``extra(point)`` adds a template's own cost, e.g. for re-reading a row)."""

    def cost(p: dict[str, int]) -> float:
        per_thread = max(1.0, tile(p) / (32 * p["num_warps"]))
        c = abs(math.log2(per_thread) - 4.0)
        n = programs(p)
        if n < sm_count:
            c += math.log2(sm_count / max(1, n))
        return c + (extra(p) if extra is not None else 0.0)

    return sorted(points, key=lambda p: (round(cost(p), 6), label("", p)))


@dataclass(frozen=True)
class AxisOp:
    """A kernel whose only op works along one axis of one dense float input."""

    node: FxNode
    x: int  # launch-argument index of the input
    out: int  # ... and of the output
    shape: list[int]  # the input's shape
    out_shape: list[int]
    axis: int

    @property
    def outer(self) -> int:
        return math.prod(self.shape[: self.axis])

    @property
    def inner(self) -> int:
        return math.prod(self.shape[self.axis + 1 :])


def match_axis_op(view: KernelView, ops: Any) -> AxisOp | None:
    """The kernel's one op when it is one of ``ops``, over one axis, on contiguous floats.

    Refused: more than one op or input, an accumulation ``dtype`` we do not model, an
    output that is not the op's own result, strided or non-float tensors.
    """
    counts = view.fragment.op_counts()
    if len(counts) != 1 or next(iter(counts)) not in ops or sum(counts.values()) != 1:
        return None
    node = view.fragment.calls()[0]
    if "dtype" in node.kwargs or len(view.tensor_args("in")) != 1:
        return None
    first = node.args[0] if node.args else None
    x, x_node, out = view.arg_for(first), view.node(first), view.only_output()
    if x is None or x_node is None or x_node.shape is None or out is None:
        return None
    axis = reduced_axis(node.args[1] if len(node.args) > 1 else None, len(x_node.shape))
    y_spec = view.args[out].tensor
    if axis is None or view.stored_node(out) is not node or not dense_io(x_node, y_spec):
        return None
    return AxisOp(node, x, out, list(x_node.shape), list(y_spec.shape), axis)
