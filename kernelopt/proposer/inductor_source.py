"""Reading and rewriting the launch configuration of one Inductor Triton kernel source.

An Inductor kernel source (the text inside ``async_compile.triton('name',
'''...''')``) has one heuristics decorator above ``@triton.jit``::

    @triton_heuristics.pointwise(size_hints={'x': 65536}, filename=__file__,
                                 triton_meta={...}, inductor_meta={...}, ...)
    @triton.jit
    def triton_poi_fused_add_0(in_ptr0, out_ptr0, xnumel, XBLOCK : tl.constexpr):

(``reduction`` / ``persistent_reduction`` add ``reduction_hint``; a kernel
Inductor already pinned uses ``fixed_config(config={...}, ...)``).  The
heuristic picks candidate launch configs at run time; we pin one instead by
rewriting the decorator to ``fixed_config`` with the same ``triton_meta`` /
``inductor_meta`` text, which leaves the kernel body -- and so its results --
untouched.  Pure text work (``ast``), no torch or triton import.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from typing import Any

from kernelopt.errors import DeterministicError

HEURISTICS = (
    "pointwise",
    "reduction",
    "persistent_reduction",
    "fixed_config",
    "cooperative_reduction",
    "template",
    "user_autotune",
    "foreach",
    "split_scan",
)
TUNABLE = ("pointwise", "reduction", "persistent_reduction", "fixed_config")
CONFIG_KEYS = ("num_warps", "num_stages")

_KERNEL_IN_WRAPPER = re.compile(
    r"^(\w+) = async_compile\.triton\('(\w+)', '''\n?(.*?)''', device_str='(\w+)'\)",
    re.DOTALL | re.MULTILINE,
)


class KernelSourceError(DeterministicError):
    """The text is not an Inductor Triton kernel source we can read."""


@dataclass
class InductorKernel:
    """What the proposer needs to know about one kernel source."""

    name: str
    heuristic: str
    decorator_start: int  # character offsets of the whole decorator, '@' included
    decorator_end: int
    keywords: dict[str, str]  # keyword -> its source text, verbatim
    size_hints: dict[str, int] = field(default_factory=dict)
    block_params: list[str] = field(default_factory=list)  # XBLOCK, YBLOCK, R0_BLOCK, ...
    body_blocks: dict[str, int] = field(default_factory=dict)  # R0_BLOCK: tl.constexpr = 128
    fixed: dict[str, Any] | None = None  # the pinned config of a fixed_config kernel
    no_x_dim: bool = False
    has_eviction_hints: bool = False
    sm_count: int = 132  # from triton_meta's DeviceProperties when present

    @property
    def tunable(self) -> bool:
        return self.heuristic in TUNABLE


def kernels_in_wrapper(wrapper: str) -> dict[str, str]:
    """``{name: source}`` of every Triton kernel an Inductor wrapper defines."""
    return {m.group(2): m.group(3) for m in _KERNEL_IN_WRAPPER.finditer(wrapper)}


def _offsets(source: str) -> list[int]:
    starts = [0]
    for line in source.splitlines(keepends=True):
        starts.append(starts[-1] + len(line))
    return starts


def _char_offset(source: str, starts: list[int], lineno: int, col_bytes: int) -> int:
    """ast columns are UTF-8 byte offsets; turn one into a character offset."""
    line_start = starts[lineno - 1]
    line = source[line_start : starts[lineno] if lineno < len(starts) else len(source)]
    return line_start + len(line.encode("utf-8")[:col_bytes].decode("utf-8", "replace"))


def _is_heuristic(node: ast.expr) -> str | None:
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and isinstance(node.func.value, ast.Name)
        and node.func.value.id == "triton_heuristics"
    ):
        return node.func.attr
    return None


def _is_constexpr(annotation: ast.expr | None) -> bool:
    return (
        isinstance(annotation, ast.Attribute)
        and annotation.attr == "constexpr"
        and isinstance(annotation.value, ast.Name)
        and annotation.value.id == "tl"
    )


def parse_kernel(source: str) -> InductorKernel:
    """Find the one heuristics-decorated ``@triton.jit`` function and read its launch space."""
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        raise KernelSourceError(
            f"kernel source does not parse: line {exc.lineno}: {exc.msg}"
        ) from None
    found: list[tuple[ast.FunctionDef, ast.Call, str]] = []
    for node in tree.body:
        if not isinstance(node, ast.FunctionDef):
            continue
        for deco in node.decorator_list:
            kind = _is_heuristic(deco)
            if kind is not None and isinstance(deco, ast.Call):
                found.append((node, deco, kind))
    if not found:
        raise KernelSourceError(
            "no @triton_heuristics.<kind>(...) decorated function in the source"
        )
    if len(found) > 1:
        names = ", ".join(f.name for f, _, _ in found)
        raise KernelSourceError(f"more than one Inductor kernel in one source ({names})")
    func, deco, kind = found[0]
    starts = _offsets(source)
    start = _char_offset(source, starts, deco.lineno, deco.col_offset)
    at = source.rfind("@", 0, start + 1)
    if at < 0 or source[at:start].strip("@ \t"):
        raise KernelSourceError("cannot locate the '@' of the heuristics decorator")
    end = _char_offset(source, starts, deco.end_lineno or deco.lineno, deco.end_col_offset or 0)
    keywords = {}
    for kw in deco.keywords:
        if kw.arg is not None:
            segment = ast.get_source_segment(source, kw.value)
            if segment is not None:
                keywords[kw.arg] = segment
    kernel = InductorKernel(
        name=func.name,
        heuristic=kind,
        decorator_start=at,
        decorator_end=end,
        keywords=keywords,
    )
    for kw in deco.keywords:
        if kw.arg == "size_hints":
            kernel.size_hints = _literal_dict(kw.value)
        elif kw.arg == "config":
            kernel.fixed = _literal_dict(kw.value)
    params = [*func.args.posonlyargs, *func.args.args]
    kernel.block_params = [
        a.arg for a in params if _is_constexpr(a.annotation) and a.arg.endswith("BLOCK")
    ]
    for stmt in func.body:
        if (
            isinstance(stmt, ast.AnnAssign)
            and isinstance(stmt.target, ast.Name)
            and _is_constexpr(stmt.annotation)
            and isinstance(stmt.value, ast.Constant)
            and isinstance(stmt.value.value, int)
        ):
            kernel.body_blocks[stmt.target.id] = stmt.value.value
    meta = keywords.get("inductor_meta", "")
    kernel.no_x_dim = bool(re.search(r"'no_x_dim':\s*True", meta))
    kernel.has_eviction_hints = "eviction_policy=" in source
    sms = re.search(r"multi_processor_count=(\d+)", keywords.get("triton_meta", ""))
    if sms:
        kernel.sm_count = max(1, int(sms.group(1)))
    return kernel


def _literal_dict(node: ast.expr) -> dict[str, Any]:
    try:
        value = ast.literal_eval(node)
    except (ValueError, SyntaxError):
        return {}
    return value if isinstance(value, dict) else {}


def config_label(config: dict[str, Any]) -> str:
    """'XBLOCK=256,num_warps=4,num_stages=1': block sizes first (sorted), then warps, stages."""
    blocks = sorted(k for k in config if k not in CONFIG_KEYS)
    keys = [*blocks, *(k for k in CONFIG_KEYS if k in config)]
    return ",".join(f"{k}={config[k]}" for k in keys)


def with_fixed_config(
    source: str, kernel: InductorKernel, config: dict[str, Any], label: str
) -> str:
    """The same kernel pinned to ``config`` through ``@triton_heuristics.fixed_config``."""
    for needed in ("triton_meta", "inductor_meta"):
        if needed not in kernel.keywords:
            raise KernelSourceError(f"the heuristics decorator has no {needed}= to carry over")
    ordered = {k: config[k] for k in sorted(config) if k not in CONFIG_KEYS}
    ordered.update({k: config[k] for k in CONFIG_KEYS if k in config})
    decorator = (
        "@triton_heuristics.fixed_config(\n"
        f"    config={ordered!r},\n"
        f"    filename={kernel.keywords.get('filename', '__file__')},\n"
        f"    triton_meta={kernel.keywords['triton_meta']},\n"
        f"    inductor_meta={kernel.keywords['inductor_meta']},\n"
        ")"
    )
    body = source[: kernel.decorator_start] + decorator + source[kernel.decorator_end :]
    return f"# kernelopt built-in variant: {label} (was {kernel.heuristic})\n" + _strip_header(body)


def without_eviction_hints(source: str) -> str:
    """The same kernel without ``eviction_policy=`` load hints (a body-level mechanical variant)."""
    stripped = re.sub(r",\s*eviction_policy='[a-z_]+'", "", source)
    return "# kernelopt built-in variant: no-eviction-hints\n" + _strip_header(stripped)


def _strip_header(source: str) -> str:
    """Drop an earlier variant's header line so labels never stack up."""
    if source.startswith("# kernelopt built-in variant:"):
        return source.split("\n", 1)[1] if "\n" in source else ""
    return source
