"""The FX graph fragment Inductor writes above each kernel, read back as data.

Inductor's wrapper comments every kernel definition with the post-decomposition
ATen graph it computes (``# Graph fragment:`` then one ``%node : ... =
call_function[target=torch.ops.aten.sub.Tensor](args = (...), kwargs = {...})``
line per node).  Templates match on this graph -- the ops a kernel computes --
rather than on kernel names, problem names or shapes.  Pure text work.

The fragment is lossy (values computed by another node of the same kernel may
appear as placeholders or not at all), so matchers check op multisets, the
reduction axis and the kernel's launch arguments, never a full expression tree.
"""

from __future__ import annotations

import ast
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

_NODE = re.compile(
    r"^#\s+%(?P<name>\w+) : (?P<meta>.*?)= "
    r"(?:PlaceHolder\[target=(?P<ph>\w+)\]"
    r"|call_function\[target=(?P<target>[\w.]+)\]\(args = \((?P<args>.*)\), kwargs = \{(?P<kwargs>.*)\}\))\s*$"
)
_TENSOR = re.compile(r'Tensor "(?P<dtype>\w+)\[(?P<shape>[^\]]*)\]\[(?P<stride>[^\]]*)\]')
_RETURN = re.compile(r"^#\s+return (?P<names>.*)$")


@dataclass(frozen=True)
class Ref:
    """A reference to another node of the fragment (``%name`` in the text)."""

    name: str


@dataclass
class FxNode:
    """One node of a fragment: a placeholder or an ATen call."""

    name: str
    op: str  # "placeholder" or the call target, e.g. "aten.sub.Tensor"
    args: list[Any] = field(default_factory=list)
    kwargs: dict[str, str] = field(default_factory=dict)
    dtype: str = ""
    shape: list[int] | None = None
    stride: list[int] | None = None
    placeholder_target: str = ""

    @property
    def short(self) -> str:
        """'aten.sub.Tensor' -> 'sub', 'prims.prepare_softmax_online.default' -> its name."""
        parts = self.op.split(".")
        return parts[1] if len(parts) >= 2 else self.op

    @property
    def is_call(self) -> bool:
        return self.op != "placeholder"


@dataclass
class Fragment:
    """A kernel's ATen graph: its nodes in order and what it returns."""

    nodes: list[FxNode]
    returns: list[str]

    def calls(self) -> list[FxNode]:
        return [n for n in self.nodes if n.is_call]

    def placeholders(self) -> list[FxNode]:
        return [n for n in self.nodes if not n.is_call]

    def op_counts(self, ignore: tuple[str, ...] = ("getitem",)) -> Counter[str]:
        """How often each ATen op appears (short names), ``getitem`` left out by default."""
        return Counter(n.short for n in self.calls() if n.short not in ignore)

    def first(self, short: str) -> FxNode | None:
        return next((n for n in self.calls() if n.short == short), None)

    def placeholder_for(self, expr: str) -> FxNode | None:
        """The placeholder standing for a wrapper buffer (``arg0_1``), if the fragment has one."""
        return next((n for n in self.placeholders() if n.placeholder_target == expr), None)

    def returned_calls(self) -> list[FxNode]:
        """Returned values computed by a call (a name may also appear as a placeholder)."""
        calls = {n.name: n for n in self.calls()}
        return [calls[r] for r in self.returns if r in calls]


def _ints(text: str) -> list[int] | None:
    text = text.strip()
    if not text:
        return []
    try:
        return [int(v) for v in text.split(",")]
    except ValueError:
        return None  # symbolic sizes: no template claims those


def _value(node: ast.expr) -> Any:
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, (ast.List, ast.Tuple)):
        return [_value(e) for e in node.elts]
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        inner = _value(node.operand)
        return -inner if isinstance(inner, (int, float)) else f"-{inner}"
    if isinstance(node, ast.Name) and node.id.startswith("__ref_"):
        return Ref(node.id[len("__ref_") :])
    return ast.unparse(node)  # torch.float32, inf, ...: kept as text


def _args(text: str) -> list[Any]:
    code = re.sub(r"%(\w+)", r"__ref_\1", text).strip()
    if not code.endswith(","):
        code += ","
    try:
        tree = ast.parse(f"({code})", mode="eval")
    except SyntaxError:
        return [text]
    body = tree.body
    return [_value(e) for e in body.elts] if isinstance(body, ast.Tuple) else [_value(body)]


def _kwargs(text: str) -> dict[str, str]:
    return {k: v.strip() for k, v in re.findall(r"(\w+): ([^,]+)", text)}


def parse_fragment(comment: str) -> Fragment | None:
    """The fragment in a block of ``#`` comment lines, or None when there is none."""
    lines = comment.splitlines()
    try:
        start = next(i for i, line in enumerate(lines) if line.strip() == "# Graph fragment:")
    except StopIteration:
        return None
    nodes: list[FxNode] = []
    returns: list[str] = []
    for line in lines[start + 1 :]:
        m = _NODE.match(line)
        if m:
            meta = _TENSOR.search(m.group("meta"))
            node = FxNode(name=m.group("name"), op="placeholder")
            if meta:
                node.dtype = meta.group("dtype")
                node.shape = _ints(meta.group("shape"))
                node.stride = _ints(meta.group("stride"))
            if m.group("ph"):
                node.placeholder_target = m.group("ph")
            else:
                target = m.group("target").removeprefix("torch.ops.")
                node.op = target
                node.args = _args(m.group("args"))
                node.kwargs = _kwargs(m.group("kwargs"))
            nodes.append(node)
            continue
        r = _RETURN.match(line)
        if r:
            returns = [n.strip().lstrip("%") for n in r.group("names").split(",") if n.strip()]
            break
    return Fragment(nodes=nodes, returns=returns) if nodes else None


def kernel_comment(wrapper: str, kernel: str) -> str:
    """The block of comment lines right above ``<kernel> = async_compile.triton(...)``."""
    lines = wrapper.splitlines()
    head = f"{kernel} = async_compile.triton("
    for i, line in enumerate(lines):
        if line.startswith(head):
            j = i
            while j > 0 and lines[j - 1].startswith("#"):
                j -= 1
            return "\n".join(lines[j:i])
    return ""


def fragment_for(wrapper: str, kernel: str) -> Fragment | None:
    """The graph fragment of ``kernel`` in an Inductor wrapper, if Inductor wrote one."""
    return parse_fragment(kernel_comment(wrapper, kernel))
