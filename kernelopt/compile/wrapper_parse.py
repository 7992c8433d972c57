"""Parse an Inductor Python wrapper module into kernels, launches and library calls.

Pure text work (``ast``), no torch: segmentation and re-stitching run on CPU
machines from committed fixtures.  The parser reads the formats of torch 2.11
(our GPU host) up to the current PyPI torch:

* kernels are defined at module level as
  ``name = async_compile.triton('name', '''<source>''', device_str='cuda')``;
* Triton launches are statements ``name.run(arg, ..., stream=streamN)`` -- the
  grid is computed inside the launcher from the numel arguments (torch >= 2.6),
  or passed as trailing grid values (templates), or as ``grid=...`` (older
  releases; recorded as text);
* library calls are statements calling ``extern_kernels.*``, ``aten.*`` or
  ``torch.ops.*``;
* the launcher is ``def call(args)`` or, with graph partitions (default since
  torch 2.9), ``class Runner`` whose ``call(self, args)`` may delegate to
  ``partition_N(args)`` functions: every function body is scanned.

Positions are kept as byte offsets into the UTF-8 source (``ast`` column
offsets are byte offsets), so edits are exact even with non-ASCII comments.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Any

from kernelopt.errors import DeterministicError

LIBRARY_ROOTS = ("extern_kernels", "aten", "torch.ops", "prims")
# Calls that allocate, view or check memory: not compute, never "library calls".
HELPER_CALLS = {
    "torch.ops.inductor._alloc_from_pool",
    "torch.ops.aten.as_strided",
    "torch.ops.inductor.resize_storage_bytes_",
    "aten.as_strided",
}
SKIP_FUNCTIONS = {"benchmark_compiled_module", "get_args", "__init__", "recursively_apply_fns"}
TRITON_DTYPES = {
    "fp32": "float32",
    "fp16": "float16",
    "bf16": "bfloat16",
    "fp64": "float64",
    "i64": "int64",
    "i32": "int32",
    "i16": "int16",
    "i8": "int8",
    "u8": "uint8",
    "i1": "bool",
    "fp8e4nv": "float8_e4m3fn",
    "fp8e5": "float8_e5m2",
}


class WrapperParseError(DeterministicError, ValueError):
    """The text is not an Inductor Python wrapper we understand."""


@dataclass
class Span:
    """Byte range [start, end) in the encoded source, plus 1-based lines."""

    start: int
    end: int
    line: int
    end_line: int


@dataclass
class KernelDef:
    name: str
    source: str
    span: Span  # the whole assignment statement
    source_span: Span  # the string literal holding the kernel source
    params: list[str] = field(default_factory=list)  # runtime params (constexprs dropped)
    param_types: dict[str, str] = field(default_factory=dict)  # from triton_meta signature
    kind: str = ""
    config: dict[str, Any] = field(default_factory=dict)


@dataclass
class BufferSpec:
    shape: list[int] | None = None
    stride: list[int] | None = None
    dtype: str | None = None
    offset: int = 0


@dataclass
class Event:
    """A launch or a library call, in program order."""

    kind: str  # "launch" | "library"
    name: str  # kernel name or library callee (extern_kernels.mm)
    function: str
    span: Span
    text: str
    indent: str
    args: list[str] = field(default_factory=list)  # positional argument expressions
    kwargs: dict[str, str] = field(default_factory=dict)
    arg_nodes: list[ast.expr] = field(default_factory=list)


@dataclass
class ParsedWrapper:
    source: str
    kernels: dict[str, KernelDef]
    other_kernels: list[str]  # async_compile.cuda/cpp/...: vendor templates, frozen
    events: list[Event]
    buffers: dict[str, BufferSpec]
    wrapper_format: str
    wait_span: Span | None  # `async_compile.wait(globals())`
    num_args: int | None  # len of `a, b, c = args` in the launcher
    functions: list[str]

    @property
    def launches(self) -> list[Event]:
        return [e for e in self.events if e.kind == "launch"]

    @property
    def library_calls(self) -> list[Event]:
        return [e for e in self.events if e.kind == "library"]

    def launches_of(self, kernel: str) -> list[Event]:
        return [e for e in self.events if e.kind == "launch" and e.name == kernel]


def dotted(node: ast.AST) -> str:
    """``torch.ops.aten.mm.default`` for an Attribute chain, "" if not a plain chain."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return ""


class _Source:
    """Byte offsets for ast positions."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.data = text.encode("utf-8")
        self.line_starts = [0]
        for i, b in enumerate(self.data):
            if b == 0x0A:
                self.line_starts.append(i + 1)

    def span(self, node: ast.AST) -> Span:
        start = self.line_starts[node.lineno - 1] + node.col_offset
        end = self.line_starts[node.end_lineno - 1] + node.end_col_offset
        return Span(start, end, node.lineno, node.end_lineno)

    def segment(self, span: Span) -> str:
        return self.data[span.start : span.end].decode("utf-8")

    def indent_of(self, line: int) -> str:
        start = self.line_starts[line - 1]
        raw = self.data[start:].split(b"\n", 1)[0].decode("utf-8")
        return raw[: len(raw) - len(raw.lstrip())]


def _literal(node: ast.AST) -> Any:
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return None


def _jsonable(value: Any) -> Any:
    if isinstance(value, (set, frozenset)):
        return sorted((_jsonable(v) for v in value), key=repr)
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    return value


def _dict_items(node: ast.AST) -> dict[str, Any]:
    """Literal entries of a dict display; entries that are not literals are skipped."""
    out: dict[str, Any] = {}
    if not isinstance(node, ast.Dict):
        return out
    for key, value in zip(node.keys, node.values, strict=False):
        k = _literal(key) if key is not None else None
        if not isinstance(k, str):
            continue
        v = _literal(value)
        if v is not None or (isinstance(value, ast.Constant) and value.value is None):
            out[k] = _jsonable(v)
    return out


def parse_kernel_source(name: str, source: str) -> tuple[list[str], dict[str, str], str, dict]:
    """Runtime parameters, their Triton types, heuristic kind and literal metadata."""
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        raise WrapperParseError(f"kernel {name}: source does not parse: {exc}") from exc
    func = next(
        (n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == name), None
    )
    if func is None:
        raise WrapperParseError(f"kernel {name}: no `def {name}(...)` in its source")
    params = []
    for arg in func.args.args:
        annotation = ast.unparse(arg.annotation) if arg.annotation is not None else ""
        if "constexpr" not in annotation:
            params.append(arg.arg)
    kind = ""
    config: dict[str, Any] = {}
    param_types: dict[str, str] = {}
    for deco in func.decorator_list:
        if not isinstance(deco, ast.Call):
            continue
        callee = dotted(deco.func)
        if not callee.startswith("triton_heuristics."):
            continue
        kind = callee.split(".", 1)[1]
        for kw in deco.keywords:
            if kw.arg in ("triton_meta", "inductor_meta"):
                config[kw.arg] = _dict_items(kw.value)
            elif kw.arg is not None and kw.arg != "filename":
                value = _literal(kw.value)
                if value is not None:
                    config[kw.arg] = _jsonable(value)
    signature = config.get("triton_meta", {}).get("signature", {})
    if isinstance(signature, dict):
        param_types = {str(k): str(v) for k, v in signature.items()}
    return params, param_types, kind, config


def _parse_tuple(node: ast.AST) -> list[int] | None:
    value = _literal(node)
    if isinstance(value, (tuple, list)) and all(isinstance(v, int) for v in value):
        return list(value)
    return None


def _dtype_of(node: ast.AST) -> str | None:
    name = dotted(node)
    if name.startswith("torch."):
        return name.split(".", 1)[1]
    return None


class _Scanner:
    def __init__(self, src: _Source, kernels: dict[str, KernelDef], others: set[str]) -> None:
        self.src = src
        self.kernels = kernels
        self.others = others
        self.events: list[Event] = []
        self.buffers: dict[str, BufferSpec] = {}
        self.num_args: int | None = None
        self.current = ""

    def scan_function(self, func: ast.FunctionDef, label: str) -> None:
        self.current = label
        self._scan_body(func.body, label)

    def _scan_body(self, body: list[ast.stmt], label: str) -> None:
        for stmt in body:
            if isinstance(stmt, (ast.With, ast.For, ast.While, ast.If, ast.Try)):
                for attr in ("body", "orelse", "finalbody"):
                    self._scan_body(getattr(stmt, attr, []) or [], label)
                for handler in getattr(stmt, "handlers", []) or []:
                    self._scan_body(handler.body, label)
                continue
            self._scan_statement(stmt, label)

    def _scan_statement(self, stmt: ast.stmt, label: str) -> None:
        self._track_buffers(stmt)
        call = None
        if (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call)) or (
            isinstance(stmt, (ast.Assign, ast.AnnAssign)) and isinstance(stmt.value, ast.Call)
        ):
            call = stmt.value
        if call is None:
            return
        func = call.func
        if (
            isinstance(func, ast.Attribute)
            and func.attr == "run"
            and isinstance(func.value, ast.Name)
            and func.value.id in self.kernels
        ):
            name = func.value.id
            args = list(call.args)
            self.events.append(self._call_event(stmt, call, label, "launch", name, arg_nodes=args))
            return
        callee = dotted(func)
        root = callee.split(".", 1)[0]
        is_library = (
            any(callee == r or callee.startswith(r + ".") for r in LIBRARY_ROOTS)
            and callee not in HELPER_CALLS
            and not callee.startswith("torch.ops.inductor._alloc")
        ) or (root in self.others and callee != root)
        if is_library:
            self.events.append(self._call_event(stmt, call, label, "library", callee))

    def _call_event(
        self, stmt: ast.stmt, call: ast.Call, label: str, kind: str, name: str, **extra: Any
    ) -> Event:
        """A launch or library call of ``stmt``: where it stands, its arguments as source."""
        span = self.src.span(stmt)
        return Event(
            kind=kind,
            name=name,
            function=label,
            span=span,
            text=self.src.segment(span),
            indent=self.src.indent_of(stmt.lineno),
            args=[ast.unparse(a) for a in call.args],
            kwargs={kw.arg or "**": ast.unparse(kw.value) for kw in call.keywords},
            **extra,
        )

    def _track_buffers(self, stmt: ast.stmt) -> None:
        if (
            isinstance(stmt, ast.Assign)
            and isinstance(stmt.value, ast.Name)
            and stmt.value.id == "args"
            and len(stmt.targets) == 1
            and isinstance(stmt.targets[0], ast.Tuple)
        ):
            # the launcher's own unpack counts, not a partition's (partitions get subsets)
            if self.current in ("call", "Runner.call") or self.num_args is None:
                self.num_args = len(stmt.targets[0].elts)
            return
        if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
            call = stmt.value
            if dotted(call.func) == "assert_size_stride" and len(call.args) >= 3:
                target = call.args[0]
                if isinstance(target, ast.Name):
                    spec = self.buffers.setdefault(target.id, BufferSpec())
                    spec.shape = _parse_tuple(call.args[1]) or spec.shape
                    spec.stride = _parse_tuple(call.args[2]) or spec.stride
            return
        if not (
            isinstance(stmt, ast.Assign)
            and len(stmt.targets) == 1
            and isinstance(stmt.targets[0], ast.Name)
        ):
            return
        name = stmt.targets[0].id
        value = stmt.value
        if isinstance(value, ast.Name) and value.id in self.buffers:
            base = self.buffers[value.id]
            self.buffers[name] = BufferSpec(base.shape, base.stride, base.dtype, base.offset)
            return
        if isinstance(value, ast.Call):
            spec = self.spec_of_call(value)
            if spec is not None:
                self.buffers[name] = spec

    def spec_of_call(self, call: ast.Call) -> BufferSpec | None:
        callee = dotted(call.func)
        if callee.startswith("empty_strided") and len(call.args) >= 2:
            dtype = _dtype_of(call.args[2]) if len(call.args) > 2 else None
            for kw in call.keywords:
                if kw.arg == "dtype":
                    dtype = _dtype_of(kw.value)
            return BufferSpec(_parse_tuple(call.args[0]), _parse_tuple(call.args[1]), dtype)
        if callee == "reinterpret_tensor" and len(call.args) >= 3:
            base = call.args[0]
            dtype = None
            if isinstance(base, ast.Name) and base.id in self.buffers:
                dtype = self.buffers[base.id].dtype
            offset = _literal(call.args[3]) if len(call.args) > 3 else 0
            return BufferSpec(
                _parse_tuple(call.args[1]),
                _parse_tuple(call.args[2]),
                dtype,
                offset if isinstance(offset, int) else 0,
            )
        return None

    def spec_of_expr(self, node: ast.expr) -> BufferSpec | None:
        if isinstance(node, ast.Name):
            return self.buffers.get(node.id)
        if isinstance(node, ast.Call):
            return self.spec_of_call(node)
        return None


def _input_dtypes(tree: ast.Module) -> dict[str, str]:
    """Graph-input dtypes from ``benchmark_compiled_module``'s ``rand_strided`` lines."""
    out: dict[str, str] = {}
    for node in ast.walk(tree):
        if not (
            isinstance(node, ast.FunctionDef)
            and node.name in ("benchmark_compiled_module", "get_args")
        ):
            continue
        for stmt in ast.walk(node):
            if (
                isinstance(stmt, ast.Assign)
                and len(stmt.targets) == 1
                and isinstance(stmt.targets[0], ast.Name)
                and isinstance(stmt.value, ast.Call)
                and dotted(stmt.value.func) == "rand_strided"
            ):
                for kw in stmt.value.keywords:
                    if kw.arg == "dtype":
                        dtype = _dtype_of(kw.value)
                        if dtype:
                            out[stmt.targets[0].id] = dtype
    return out


def parse_wrapper(source: str) -> ParsedWrapper:
    """Parse Inductor's wrapper module text.  Raises ``WrapperParseError`` on junk."""
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        raise WrapperParseError(f"wrapper does not parse: line {exc.lineno}: {exc.msg}") from exc
    src = _Source(source)
    kernels: dict[str, KernelDef] = {}
    others: set[str] = set()
    wait_span = None
    for stmt in tree.body:
        if (
            isinstance(stmt, ast.Expr)
            and isinstance(stmt.value, ast.Call)
            and dotted(stmt.value.func) == "async_compile.wait"
        ):
            wait_span = src.span(stmt)
        if not (
            isinstance(stmt, ast.Assign)
            and len(stmt.targets) == 1
            and isinstance(stmt.targets[0], ast.Name)
            and isinstance(stmt.value, ast.Call)
        ):
            continue
        callee = dotted(stmt.value.func)
        if not callee.startswith("async_compile."):
            continue
        name = stmt.targets[0].id
        if callee != "async_compile.triton":
            others.add(name)
            continue
        call = stmt.value
        if len(call.args) < 2 or not isinstance(call.args[1], ast.Constant):
            raise WrapperParseError(f"kernel {name}: unexpected async_compile.triton(...) form")
        kernel_source = call.args[1].value
        if not isinstance(kernel_source, str):
            raise WrapperParseError(f"kernel {name}: source is not a string")
        params, types, kind, config = parse_kernel_source(name, kernel_source)
        kernels[name] = KernelDef(
            name=name,
            source=kernel_source,
            span=src.span(stmt),
            source_span=src.span(call.args[1]),
            params=params,
            param_types=types,
            kind=kind,
            config=config,
        )
    scanner = _Scanner(src, kernels, others)
    functions: list[str] = []
    wrapper_format = "call-function"
    for stmt in tree.body:
        if isinstance(stmt, ast.FunctionDef) and stmt.name not in SKIP_FUNCTIONS:
            functions.append(stmt.name)
            scanner.scan_function(stmt, stmt.name)
        elif isinstance(stmt, ast.ClassDef):
            if stmt.name == "Runner":
                wrapper_format = "runner-class"
            for item in stmt.body:
                if isinstance(item, ast.FunctionDef) and item.name not in SKIP_FUNCTIONS:
                    label = f"{stmt.name}.{item.name}"
                    functions.append(label)
                    scanner.scan_function(item, label)
    if "call" not in functions and "Runner.call" not in functions:
        raise WrapperParseError("no `call(args)` launcher found: not an Inductor wrapper")
    for name, dtype in _input_dtypes(tree).items():
        spec = scanner.buffers.setdefault(name, BufferSpec())
        spec.dtype = spec.dtype or dtype
    return ParsedWrapper(
        source=source,
        kernels=kernels,
        other_kernels=sorted(others),
        events=scanner.events,
        buffers=scanner.buffers,
        wrapper_format=wrapper_format,
        wait_span=wait_span,
        num_args=scanner.num_args,
        functions=functions,
    )


def arg_role(param: str, ptype: str) -> str:
    """Inductor names kernel parameters by what they do; the role follows from the name."""
    if param.startswith("in_out_ptr"):
        return "inout"
    if param.startswith("out_ptr"):
        return "out"
    if param.startswith(("in_ptr", "arg_")):
        return "in"
    if param.startswith("ws_ptr") or param.startswith("workspace"):
        return "workspace"
    if ptype.startswith("*"):
        return "ptr"
    return "scalar"


def triton_dtype(ptype: str) -> str | None:
    """``*fp32`` -> ``float32`` (pointer element types in triton_meta signatures)."""
    if not ptype.startswith("*"):
        return None
    return TRITON_DTYPES.get(ptype.lstrip("*k"))
