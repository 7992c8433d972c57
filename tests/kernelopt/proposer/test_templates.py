"""Expert templates: candidates match PyTorch under the interpreter; matchers refuse near-misses."""

from __future__ import annotations

import ast
import types
import warnings
from pathlib import Path

import pytest
import torch

from kernelopt.contracts.compiled import KernelArg, SegmentResult, TensorSpec
from kernelopt.proposer.fragment import fragment_for, parse_fragment
from kernelopt.proposer.templates import TEMPLATES, matches
from kernelopt.proposer.templates.base import KernelView, kernel_text, read_header

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "wrappers"


def interpreted() -> bool:
    """True when this process's triton.language runs under the interpreter.

    Triton decides it when ``triton.language`` is first imported (tl.max and tl.sum are
    @triton.jit functions themselves); in a whole-suite run an earlier package may have
    imported it first, and then these kernels run in a fresh interpreter instead
    (``test_template_kernels_in_a_fresh_interpreter``).
    """
    import triton.language as tl
    from triton.runtime.interpreter import InterpretedFunction

    return isinstance(tl.max, InterpretedFunction)


needs_interpreter = pytest.mark.skipif(
    not interpreted(),
    reason="triton.language was imported in compiled mode here: run in a fresh interpreter",
)
_SHORT = {torch.float32: "f32", torch.int64: "i64"}


def _meta(t: torch.Tensor) -> str:
    shape = ", ".join(map(str, t.shape))
    stride = ", ".join(map(str, t.stride()))
    return f'Tensor "{_SHORT[t.dtype]}[{shape}][{stride}]cuda:0"'


def _view(inputs: dict[str, torch.Tensor], calls: list[str], out: torch.Tensor, ret: str):
    """A fragment in Inductor's comment format plus the launch arguments ``(ins..., out)``."""
    lines = ["# Graph fragment:"]
    lines += [f"#   %{n} : {_meta(t)} = PlaceHolder[target={n}]" for n, t in inputs.items()]
    for call in calls:
        name, target, args, kwargs = call.split(" | ")
        lines.append(
            f"#   %{name} : {_meta(out)}[num_users=1] = call_function[target=torch.ops.{target}]"
            f"(args = ({args}), kwargs = {{{kwargs}}})"
        )
    lines.append(f"#   return %{ret}")
    spec = lambda t: TensorSpec(  # noqa: E731
        shape=list(t.shape), stride=list(t.stride()), dtype=str(t.dtype).split(".")[1]
    )
    args = [
        KernelArg(name=f"in_ptr{i}", tensor=spec(t), expr=n, role="in")
        for i, (n, t) in enumerate(inputs.items())
    ]
    args.append(KernelArg(name="out_ptr0", tensor=spec(out), expr="buf0", role="out"))
    fragment = parse_fragment("\n".join(lines))
    return KernelView(name="k", fragment=fragment, args=args), [*inputs.values(), out]


def _run_all(view: KernelView, tensors: list[torch.Tensor], expected: torch.Tensor, name: str):
    found = matches(view)
    assert [t.name for t, _ in found] == [name]
    template, match = found[0]
    grid = template.grid(match, 4)
    assert grid
    # the first points of the grid and one looped / split point when the grid has one
    points = grid[:2] + [p for p in grid if p.get("BLOCK", 0) < match.consts.get("n_cols", 0)][:1]
    points += [p for p in grid if p.get("SPLIT", 1) > 1][:1]
    for params in points:
        text = template.render(match, params)
        assert read_header(text)[1] == params
        module = types.ModuleType("cand")
        exec(compile(text, "<cand>", "exec"), module.__dict__)
        out = tensors[-1]
        out.fill_(float("nan"))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            module.launch(*tensors)
        torch.testing.assert_close(out, expected, rtol=1e-5, atol=1e-5, msg=f"{params}")


@needs_interpreter
@pytest.mark.parametrize("rows,cols", [(1, 37), (5, 100), (3, 1300)])
@pytest.mark.parametrize("log", [False, True])
def test_softmax_template_matches_torch(rows, cols, log):
    x = torch.randn(rows, cols) * 3
    out = torch.empty_like(x)
    if log:
        calls = [
            "amax | aten.amax.default | %x, [-1], True | ",
            "sub | aten.sub.Tensor | %x, %amax | ",
            "exp | aten.exp.default | %sub, | ",
            "sum_1 | aten.sum.dim_IntList | %exp, [-1], True | ",
            "log | aten.log.default | %sum_1, | ",
            "sub_1 | aten.sub.Tensor | %sub, %log | ",
        ]
        ret, ref = "sub_1", torch.log_softmax(x, -1)
    else:
        calls = [
            "p | prims.prepare_softmax_online.default | %x, -1 | ",
            "sub | aten.sub.Tensor | %x, %getitem | ",
            "exp | aten.exp.default | %sub, | ",
            "div | aten.div.Tensor | %exp, %getitem_1 | ",
        ]
        ret, ref = "div", torch.softmax(x, -1)
    view, tensors = _view({"x": x}, calls, out, ret)
    _run_all(view, tensors, ref, "softmax")


@needs_interpreter
@pytest.mark.parametrize("rows,cols", [(1, 64), (7, 33), (2, 3000)])
def test_layer_norm_template_matches_torch(rows, cols):
    x, w, b = torch.randn(rows, cols) * 2 + 3, torch.randn(cols), torch.randn(cols)
    out = torch.empty_like(x)
    calls = [
        "var_mean | aten.var_mean.correction | %x, [1] | correction: 0, keepdim: True",
        "sub | aten.sub.Tensor | %x, %getitem_1 | ",
        "add | aten.add.Tensor | %getitem, 1e-05 | ",
        "rsqrt | aten.rsqrt.default | %add, | ",
        "mul | aten.mul.Tensor | %sub, %rsqrt | ",
        "mul_1 | aten.mul.Tensor | %mul, %w | ",
        "add_1 | aten.add.Tensor | %mul_1, %b | ",
    ]
    view, tensors = _view({"x": x, "w": w, "b": b}, calls, out, "add_1")
    _run_all(view, tensors, torch.nn.functional.layer_norm(x, (cols,), w, b, 1e-5), "norm")


@needs_interpreter
@pytest.mark.parametrize("rows,cols", [(1, 50), (6, 2100)])
def test_rms_norm_template_matches_torch(rows, cols):
    x, w = torch.randn(rows, cols), torch.randn(cols)
    out = torch.empty_like(x)
    calls = [
        "pow_1 | aten.pow.Tensor_Scalar | %x, 2 | ",
        "mean | aten.mean.dim | %pow_1, [-1], True | ",
        "add | aten.add.Tensor | %mean, 1e-06 | ",
        "rsqrt | aten.rsqrt.default | %add, | ",
        "mul | aten.mul.Tensor | %x, %rsqrt | ",
        "mul_1 | aten.mul.Tensor | %mul, %w | ",
    ]
    view, tensors = _view({"x": x, "w": w}, calls, out, "mul_1")
    ref = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w
    _run_all(view, tensors, ref, "norm")


@needs_interpreter
@pytest.mark.parametrize(
    "shape,dim,op",
    [
        ((1, 70), 1, "sum"),
        ((9, 33), -1, "mean"),
        ((3, 5000), 1, "amax"),
        ((4, 37, 6), 1, "amin"),
        ((2, 300, 130), 1, "sum"),
    ],
)
def test_reduce_template_matches_torch(shape, dim, op):
    x = torch.randn(*shape)
    ref = getattr(torch, op)(x, dim=dim)
    out = torch.empty_like(ref)
    view, tensors = _view({"x": x}, [f"r | aten.{op}.dim | %x, [{dim}] | "], out, "r")
    _run_all(view, tensors, ref, "reduce")


@needs_interpreter
@pytest.mark.parametrize(
    "rows,cols,kind", [(1, 40, "argmax"), (6, 3000, "argmin"), (5, 129, "argmax")]
)
def test_argreduce_template_keeps_first_index_and_nan_rules(rows, cols, kind):
    x = torch.round(torch.randn(rows, cols))  # many ties
    x[-1, cols // 2] = float("nan")
    ref = getattr(torch, kind)(x, -1).to(torch.float32)
    out = torch.empty(rows)
    calls = [
        f"a | aten.{kind}.default | %x, -1 | ",
        "c | prims.convert_element_type.default | %a, torch.float32 | ",
    ]
    view, tensors = _view({"x": x}, calls, out, "c")
    _run_all(view, tensors, ref, "argreduce")


@needs_interpreter
@pytest.mark.parametrize(
    "shape,dim,op",
    [
        ((1, 37), 1, "cumsum"),
        ((5, 300), -1, "cumsum"),
        ((3, 2500), 1, "cumsum"),  # several chunks: the carry crosses them
        ((4, 90), 1, "cumprod"),
        ((2, 40, 6), 1, "cumsum"),  # a strided axis
        ((3, 7, 5), 1, "cumprod"),
    ],
)
def test_scan_template_matches_torch(shape, dim, op):
    x = torch.randn(*shape)
    if op == "cumprod":
        x = 1.0 + 0.05 * x  # a long product of randn overflows or vanishes
    ref = getattr(torch, op)(x, dim=dim)
    out = torch.empty_like(ref)
    view, tensors = _view({"x": x}, [f"c | aten.{op}.default | %x, {dim} | "], out, "c")
    found = matches(view)
    assert [t.name for t, _ in found] == ["scan"]
    template, match = found[0]
    grid = template.grid(match, 4)
    # the grid's first points, and for a long row one that loops over several chunks
    points = grid[:2] + [p for p in grid if p.get("BLOCK", 1 << 30) < shape[-1]][:1]
    for params in points:
        module = types.ModuleType("cand")
        exec(compile(template.render(match, params), "<cand>", "exec"), module.__dict__)
        out.fill_(float("nan"))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            module.launch(*tensors)
        torch.testing.assert_close(out, ref, rtol=1e-4, atol=1e-4, msg=f"{params}")
    if shape == (3, 2500):
        assert any(p["BLOCK"] < 2500 for p in points), "no looped point was run"


def test_scan_near_misses_are_refused():
    x = torch.randn(4, 64)
    out = torch.empty_like(x)
    assert matches(_view({"x": x}, ["c | aten.cumsum.default | %x, 1 | "], out, "c")[0])
    with_dtype = ["c | aten.cumsum.default | %x, 1 | dtype: torch.float64"]
    assert not matches(_view({"x": x}, with_dtype, out, "c")[0])
    scaled = ["m | aten.mul.Tensor | %x, 2 | ", "c | aten.cumsum.default | %m, 1 | "]
    assert not matches(_view({"x": x}, scaled, out, "c")[0])  # a fused pointwise op: not ours
    t = torch.randn(64, 4).t()
    assert not matches(_view({"x": t}, ["c | aten.cumsum.default | %x, 1 | "], out, "c")[0])
    ints = torch.randint(0, 5, (4, 64))
    view, _ = _view({"x": ints}, ["c | aten.cumsum.default | %x, 1 | "], ints.clone(), "c")
    assert not matches(view)  # integer scans widen to int64 in torch: not modelled


def test_near_misses_are_refused():
    x = torch.randn(4, 64)
    out = torch.empty_like(x)
    softmax = [
        "p | prims.prepare_softmax_online.default | %x, -1 | ",
        "sub | aten.sub.Tensor | %x, %getitem | ",
        "exp | aten.exp.default | %sub, | ",
        "div | aten.div.Tensor | %exp, %getitem_1 | ",
    ]
    assert matches(_view({"x": x}, softmax, out, "div")[0])
    scaled = ["m | aten.mul.Tensor | %x, 0.5 | ", *softmax]  # a scaled softmax: not ours
    assert not matches(_view({"x": x}, scaled, out, "div")[0])
    first_axis = [softmax[0].replace("%x, -1", "%x, 0"), *softmax[1:]]
    assert not matches(_view({"x": x}, first_axis, out, "div")[0])
    squared_sum = ["s | aten.mul.Tensor | %x, %x | ", "r | aten.sum.dim | %s, [-1] | "]
    assert not matches(_view({"x": x}, squared_sum, torch.empty(4), "r")[0])
    two_axes = ["r | aten.sum.dim | %x, [0, 1] | "]
    assert not matches(_view({"x": x}, two_axes, torch.empty(()), "r")[0])
    t = torch.randn(64, 4).t()  # a transposed (non-contiguous) input
    assert not matches(_view({"x": t}, softmax, torch.empty(4, 64), "div")[0])
    no_dim = ["a | aten.argmax.default | %x, None | "]
    assert not matches(_view({"x": x}, no_dim, torch.empty((), dtype=torch.int64), "a")[0])


def test_captured_kernels_match_by_their_aten_graph():
    """The H200 fixtures: softmax, layer norm and argmax kernels match; others do not."""
    found = {}
    for seg_path in sorted(FIXTURES.glob("*.segment.json")):
        segment = SegmentResult.model_validate_json(seg_path.read_text())
        wrapper = seg_path.with_name(seg_path.name.replace(".segment.json", ".py.txt")).read_text()
        for kernel in segment.kernels:
            fragment = fragment_for(wrapper, kernel.name)
            if fragment is not None:
                view = KernelView(kernel.name, fragment, list(kernel.args))
                found[kernel.name] = [t.name for t, _ in matches(view)]
    assert found["triton_red_fused__softmax_exp_prepare_softmax_online_sub_0"] == ["softmax"]
    assert found["triton_red_fused_native_layer_norm_0"] == ["norm"]
    assert found["triton_red_fused__to_copy_argmax_0"] == ["argreduce"]
    assert found["triton_poi_fused_add_mul_relu_sub_0"] == []
    assert found["triton_red_fused_convolution_gelu_mean_2"] == []  # mean of a gelu: fused ops


def test_candidate_kernels_import_only_torch_and_triton() -> None:
    """The shared tiles (k_tiles.py) are written into a candidate, not imported from kernelopt."""
    for template in TEMPLATES:
        tree = ast.parse(kernel_text(template.kernel_file))
        imported = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
        imported |= {n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
        assert {m.split(".")[0] for m in imported} <= {"torch", "triton"}, template.name
        defined = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
        called = {
            n.func.id
            for n in ast.walk(tree)
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
        }
        assert {c for c in called if c.startswith("ko_")} <= defined, template.name


def test_template_kernels_in_a_fresh_interpreter() -> None:
    """Where this process could not interpret them, the kernel tests run in a child that can."""
    if interpreted():
        pytest.skip("the kernel tests ran in this process")
    import os
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[3]
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-n",
            "0",  # in this process: xdist's workers would each import torch and collect again
            "-k",
            "matches_torch or argreduce",
            str(Path(__file__)),
        ],
        cwd=root,
        env={**os.environ, "TRITON_INTERPRET": "1"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0 and "25 passed" in done.stdout, done.stdout[-3000:]
