"""Gates 2 and 3's comparisons decide and report exactly as the straightforward rules did.

Every report is compared with a golden one (``tests.support.numerics_golden``,
written once by the old rules, which spelled every rule out over whole float64
copies), field by field, floats bit for bit: verdicts, counts, maxima, indices,
sums and messages.  The inputs are drawn again from their seeds.  Chunks and blocks
are made small so that a few thousand elements cross many of their boundaries.
"""

from __future__ import annotations

import math
import os
import threading
from collections.abc import Iterator
from typing import Any

import pytest
import torch

import gates.numerics as numerics
import gates.reference_facts as reference_facts
from gates.model_gate import model_verdict_from_sets
from gates.numerics import compare_outputs, comparison_threads, model_error_rule
from gates.reference_facts import ReferenceFacts, ScratchPool
from kernelopt.contracts.verdicts import GateSettings
from tests.support.numerics_golden import ENV, Golden, load_oracle, outcome, same

CHUNK = 1000
BLOCK = 300  # blocks that do not divide a chunk
TOL = {"rtol": 1e-3, "atol": 1e-3, "scale_tol": 2e-3}
RULE = {"tolerance": 1e-4, "rho_max": 10.0, "d_ref_floor": 1e-8, "abs_bound": 1e-7}
NAN, INF = float("nan"), float("inf")


class Check:
    """Runs the current comparisons and holds each report to the golden one."""

    def __init__(self, golden: Golden) -> None:
        self.golden = golden

    def gate2(self, outs: list[Any], refs: list[Any], facts: ReferenceFacts | None = None, **tol):
        tol = tol or TOL
        want = self.golden.expected("compare_outputs", outs, refs, **tol)
        got = outcome(compare_outputs, outs, refs, facts=facts, **tol)
        assert same(got, want), (got, want)
        return got

    def gate3(self, o32, b32, b64, facts: ReferenceFacts | None = None, **rule):
        rule = rule or RULE
        want = self.golden.expected("model_error_rule", o32, b32, b64, **rule)
        got = outcome(model_error_rule, o32, b32, b64, facts=facts, **rule)
        assert same(got, want), (got, want)
        return got

    def both(self, outs, refs, refs64=None, facts: ReferenceFacts | None = None):
        """Gate 2 then gate 3 on the same objects, as the cascade calls them."""
        g2 = self.gate2(outs, refs, facts)
        o32 = [t for t in outs if hasattr(t, "shape")]
        b32 = [t for t in refs if hasattr(t, "shape")]
        b64 = [t for t in refs64 if hasattr(t, "shape")] if refs64 is not None else None
        g3 = self.gate3(o32, b32, b64, facts)
        return g2, g3


@pytest.fixture(autouse=True)
def _small_chunks(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(numerics, "_CHUNK", CHUNK)
    monkeypatch.setattr(reference_facts, "BLOCK", BLOCK)
    with comparison_threads():
        yield


@pytest.fixture
def check(request: pytest.FixtureRequest) -> Iterator[Check]:
    """This test's golden reports; recorded from the oracle when ``NUMERICS_GOLDEN_REV`` is set."""
    rev = os.environ.get(ENV, "")
    case = request.node.callspec.id if hasattr(request.node, "callspec") else "-"
    golden = Golden(request.node.originalname, case, load_oracle(rev, CHUNK) if rev else None)
    failed = request.session.testsfailed
    yield Check(golden)
    if request.session.testsfailed == failed:  # a failed test asked for fewer reports
        golden.close()


def _pair(gen: torch.Generator, shape: tuple[int, ...], noise: float = 1e-6):
    b64 = torch.randn(shape, generator=gen, dtype=torch.float64)
    b32 = b64.float()
    out = b32 + noise * torch.randn(shape, generator=gen)
    return out, b32, b64


# ------------------------------------------------------------------- honest and wrong values


def test_honest_outputs_over_many_chunks(check: Check) -> None:
    gen = torch.Generator().manual_seed(0)
    facts = ReferenceFacts()
    out, b32, b64 = _pair(gen, (37, 211))
    g2, g3 = check.both([out], [b32], [b64], facts)
    assert g2["ok"] and g3["ok"] and g3["rule"] == "tolerance"
    for noise in (0.0, 1e-8, 1e-4, 3e-3, 1.0):  # more candidates against the same reference
        cand = b32 + noise * torch.randn(b32.shape, generator=gen)
        check.both([cand], [b32], [b64], facts)


def test_large_outputs_count_mismatches_and_closeness_element_by_element(check: Check) -> None:
    """Errors above atol and above the model tolerance: the exact counting paths."""
    gen = torch.Generator().manual_seed(1)
    b64 = 1000 * torch.randn(5000, generator=gen, dtype=torch.float64)
    b32 = b64.float()
    for rel in (1e-7, 5e-7, 2e-6, 5e-4, 2e-3):
        out = b32 * (1 + rel * torch.randn(5000, generator=gen))
        check.both([out], [b32], [b64], ReferenceFacts())


def _ulps(value: float, dtype: torch.dtype, steps: int = 2) -> list[float]:
    """``value`` rounded to ``dtype`` and its neighbours, ``steps`` ulps either side."""
    x = torch.tensor(value, dtype=dtype)
    out = [float(x)]
    for direction in (INF, -INF):
        y = x
        for _ in range(steps):
            y = torch.nextafter(y, torch.tensor(direction, dtype=dtype))
            out.append(float(y))
    return sorted(out)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("rtol,atol", [(1e-3, 1e-3), (1e-4, 1e-4), (0.0, 1e-3), (1e-3, 0.0)])
def test_errors_on_the_tolerance_boundaries(
    check: Check, dtype: torch.dtype, rtol: float, atol: float
) -> None:
    """Elements on, just inside or just outside ``atol + rtol|r|``, the rest honest.

    Where ``r`` is 0 the allowance is ``atol`` itself, the bound under which the
    finite path skips the elementwise count (and closeness check); where ``|r|`` is
    large the ``rtol`` term decides.  Outputs of either dtype (gate 3 takes a float64
    output against an fp32 baseline as well).  One element of 1e6 makes gate 3's
    scale-aware bound loose, so that closeness decides its tolerance rule.
    """
    gen = torch.Generator().manual_seed(2)
    b64 = torch.randn(2500, generator=gen, dtype=torch.float64)
    b64[1200], b64[1700], b64[2400] = 0.0, 1000.0, 1e6
    b32 = b64.to(dtype)
    honest = (b32.double() * (1 + 1e-12)).to(dtype)
    tol = {"rtol": rtol, "atol": atol, "scale_tol": 1.0}
    rule = {**RULE, "tolerance": atol}
    for zero_err in (*_ulps(atol, dtype, 1), 0.0):  # error at r = 0: at, under, over atol
        for allowed in (atol + rtol * 1000.0, atol + abs(atol * 1000.0)):  # gate 2's, isclose's
            for value in _ulps(1000.0 + allowed, dtype) + _ulps(1000.0 - allowed, dtype):
                out = honest.clone()
                out[1200], out[1700] = zero_err, value
                check.gate2([out], [b32], ReferenceFacts(), **tol)
                check.gate3([out], [b32], [b64], ReferenceFacts(), **rule)
                check.gate3([out.double()], [b32], [b64], ReferenceFacts(), **rule)


def test_tolerances_outside_the_finite_path(check: Check) -> None:
    """Negative or NaN tolerances: whatever the old rules did (raise or decide), the same."""
    gen = torch.Generator().manual_seed(13)
    _, b32, b64 = _pair(gen, (2100,))
    b32[5] = b64[5] = 0.0
    out = b32 + 5e-4  # every error under atol = 1e-3
    for value in (-1e-4, -1e-3, NAN, INF, 0.0):
        check.gate3([out], [b32], [b64], ReferenceFacts(), **{**RULE, "tolerance": value})
        check.gate2([out], [b32], ReferenceFacts(), rtol=value, atol=1e-3, scale_tol=1.0)
        check.gate2([out], [b32], ReferenceFacts(), rtol=1e-3, atol=value, scale_tol=1.0)


def test_tiny_outputs_and_zeros(check: Check) -> None:
    gen = torch.Generator().manual_seed(3)
    b64 = 1e-5 * torch.randn(2500, generator=gen, dtype=torch.float64)
    b32 = b64.float()
    for out in (torch.zeros_like(b32), b32 * 0.5, b32.clone(), -b32):
        check.both([out], [b32], [b64], ReferenceFacts())
    zero = torch.zeros(2500)
    check.both([zero.clone()], [zero], [zero.double()], ReferenceFacts())
    check.both([zero + 1e-9], [zero], [zero.double()], ReferenceFacts())


def test_bias_at_depth_and_exact_baselines(check: Check) -> None:
    torch.manual_seed(0)
    d = 64
    ws = [torch.randn(d, d) / math.sqrt(d) for _ in range(24)]
    x = torch.randn(48, d)

    def deep(x: torch.Tensor, ws: list[torch.Tensor], bias: float = 0.0) -> torch.Tensor:
        """Each layer in float64, rounded to the input's dtype: the same bits on any CPU.
        A matmul's kernels (float64 ones too) and a vectorised tanh differ by instruction
        set, so the products are summed one term at a time and tanh is the C library's."""
        for w in ws:
            y, w64 = x.double(), w.double()
            acc = torch.zeros(y.shape[0], w64.shape[1], dtype=torch.float64)
            for k in range(w64.shape[0]):
                acc = acc + y[:, k : k + 1] * w64[k : k + 1, :]
            x = (y + 0.1 * acc.apply_(math.tanh) + bias).to(x.dtype)
        return x

    b32 = deep(x, ws)
    b64 = deep(x.double(), [w.double() for w in ws])
    facts = ReferenceFacts()
    for bias in (0.0, 1e-6, 5e-5, 5e-4):
        _, g3 = check.both([deep(x, ws, bias)], [b32], [b64], facts)
    assert g3["rule"] == "rho" and not g3["ok"]
    exact = torch.randn(3001)  # the float64 baseline is the fp32 one: d_ref = 0
    for out in (exact.clone(), exact + 1e-3 * exact.abs().max(), exact + 1e-6):
        check.both([out], [exact], [exact.double()], ReferenceFacts())
    check.gate3([exact + 0.1], [exact], None, ReferenceFacts())  # no float64 baseline
    check.gate3([exact.clone()], [exact], None, ReferenceFacts())


# ------------------------------------------------------------------------ non-finite values


def test_poison_and_non_finite_outputs_where_the_baseline_is_finite(check: Check) -> None:
    gen = torch.Generator().manual_seed(4)
    out, b32, b64 = _pair(gen, (4, 2500))
    for poke in (
        lambda t: t.view(-1)[2600:2700].fill_(NAN),  # unwritten, second chunk only
        lambda t: t.view(-1)[-1:].fill_(NAN),
        lambda t: t.view(-1)[5].fill_(INF),
        lambda t: t.view(-1)[9000].fill_(-INF),
        lambda t: t.fill_(NAN),
    ):
        cand = out.clone()
        poke(cand)
        g2, g3 = check.both([cand], [b32], [b64], ReferenceFacts())
        assert not g2["ok"] and not g3["ok"]


def test_non_finite_references(check: Check) -> None:
    gen = torch.Generator().manual_seed(5)
    out, b32, b64 = _pair(gen, (3000,))
    b32[10], b64[10] = NAN, NAN
    b32[1500], b64[1500] = INF, INF
    b32[2999], b64[2999] = -INF, -INF
    facts = ReferenceFacts()
    for cand in (b32.clone(), out, torch.where(b32.isfinite(), out, b32)):
        check.both([cand], [b32], [b64], facts)
    only64 = b64.clone()
    only64[7] = NAN  # the float64 baseline alone is not finite
    check.both([b32 + 1e-6], [b32], [only64], ReferenceFacts())
    huge = torch.full((1200,), 1e308, dtype=torch.float64)  # differences overflow to inf
    check.both([-huge], [huge], [huge], ReferenceFacts())
    all_nan = torch.full((1500,), NAN)  # no finite value: the old rule raises, so must the new
    check.both([all_nan.clone()], [all_nan], [all_nan.double()], ReferenceFacts())


# ----------------------------------------------------------------- structure and leaf kinds


def test_structure_shapes_dtypes_and_leaf_kinds(check: Check) -> None:
    gen = torch.Generator().manual_seed(6)
    out, b32, b64 = _pair(gen, (50, 40))
    ints = torch.arange(2100)
    half = torch.randn(1700, generator=gen).half()
    f64 = torch.randn(1300, generator=gen, dtype=torch.float64)
    empty = torch.zeros(0, 3)
    scalar = torch.tensor(2.5)
    refs = [b32, ints, half, 7, f64, empty, scalar]
    refs64 = [b64, ints, half.double(), 7, f64, empty.double(), scalar.double()]
    outs = [out, ints.clone(), half + 0.001, 7, f64 + 1e-9, empty.clone(), scalar + 1e-7]
    facts = ReferenceFacts()
    check.both(outs, refs, refs64, facts)
    check.both(outs, refs, refs64, facts)  # again: the kept facts
    bad_ints = ints.clone()
    bad_ints[3] = -1
    variants = [
        [out.reshape(-1), *outs[1:]],  # shape
        [out.double(), *outs[1:]],  # dtype
        outs[:-1],  # one output missing
        [out, bad_ints, *outs[2:]],
        [out, ints.clone(), half, 8, *outs[4:]],  # a non-tensor value differs
        [out.t().contiguous().t(), *outs[1:]],  # other strides, same values
        [out, ints.float(), *outs[2:]],  # float where the baseline is integer
    ]
    for cand in variants:
        check.gate2(cand, refs, facts)
        o32 = [t for t in cand if hasattr(t, "shape")]
        check.gate3(o32, [t for t in refs if hasattr(t, "shape")], None, facts)
        check.gate3(
            o32,
            [t for t in refs if hasattr(t, "shape")],
            [t for t in refs64 if hasattr(t, "shape")],
            facts,
        )
    check.gate3([out], [b32], [b64, b64], facts)  # a float64 baseline of another structure
    check.gate3([out], [b32], [b64[:25]], facts)
    check.gate3([out], [b32], [b64.float()], facts)  # float64 baseline in fp32


def test_complex_and_bfloat16_outputs(check: Check) -> None:
    gen = torch.Generator().manual_seed(7)
    c = torch.randn(1500, generator=gen, dtype=torch.complex64)
    check.gate2([c + 1e-4], [c], ReferenceFacts())  # real and imaginary parts alike
    check.gate2([c + 1e-2j], [c], ReferenceFacts())  # the imaginary parts alone wrong
    check.gate2([c.conj()], [c], ReferenceFacts())
    c64 = c.to(torch.complex128)
    check.both([c + 1e-5j], [c], [c64], ReferenceFacts())
    check.both([torch.complex(c.real, torch.zeros_like(c.imag))], [c], [c64], ReferenceFacts())
    bf = torch.randn(2200, generator=gen).bfloat16()
    check.both([bf + 0.01], [bf], [bf.double()], ReferenceFacts())


def test_worst_element_ties_across_and_within_chunks(check: Check) -> None:
    ref = torch.zeros(5000)
    out = ref.clone()
    out[4321] = out[1234] = out[1240] = 0.5  # first holder: chunk 1, index 1234
    out[3000] = -0.5
    g2 = check.gate2([out], [ref], ReferenceFacts())
    assert g2["leaves"][0]["worst_index"] == [1234]
    out[6 - 1] = NAN  # a straightforward chunk before the finite one that holds the max
    check.gate2([out], [ref], ReferenceFacts())
    out[5] = 0.5
    check.gate2([out], [ref], ReferenceFacts())


def test_random_outputs_against_the_straightforward_rules(check: Check) -> None:
    """Random shapes, dtypes, magnitudes and errors, with NaN/inf sprinkled on either side."""
    gen = torch.Generator().manual_seed(8)
    shared = ReferenceFacts()

    def rand(n: int) -> float:
        return float(torch.rand((), generator=gen)) * n

    for case in range(120):
        numel = [1, 7, 999, 1000, 1001, 2999, 4500][case % 7]
        scale = 10 ** (rand(12) - 6)
        b64 = scale * torch.randn(numel, generator=gen, dtype=torch.float64)
        dtype = [torch.float32, torch.float32, torch.float64, torch.float16][case % 4]
        b32 = b64.to(dtype)
        noise = 10 ** (rand(10) - 9) * scale
        out = (b32.double() + noise * torch.randn(numel, generator=gen, dtype=torch.float64)).to(
            dtype
        )
        for target, values in ((out, (NAN, INF, -INF)), (b32, (NAN, INF)), (b64, (NAN,))):
            if rand(1) < 0.15:
                idx = torch.randint(0, numel, (1 + int(rand(3)),), generator=gen)
                target[idx] = values[int(rand(len(values)))]
        facts = shared if case % 2 else None
        tol = {"rtol": [1e-3, 1e-5, 0.0][case % 3], "atol": [1e-3, 1e-6][case % 2]}
        check.gate2([out], [b32], facts, scale_tol=2e-3, **tol)
        check.gate3([out], [b32], [b64], facts)
        check.gate3([out], [b32], None, facts)


# ---------------------------------------------------------------------- more edge cases


def test_non_finite_values_on_either_side(check: Check) -> None:
    """Every pairing of NaN, +inf, -inf and a finite value, in the reference and the output.

    A non-finite reference value must be reproduced exactly; a NaN output where the
    reference is finite is poison, an infinite one a non-finite value.  Gate 3 sees the
    same pairs with a float64 baseline that agrees with the fp32 one, or is finite alone.
    """
    values = [1.5, NAN, INF, -INF]
    for ref_value in values:
        for out_value in values:
            gen = torch.Generator().manual_seed(20)
            out, b32, b64 = _pair(gen, (2, 1100))
            b32.view(-1)[1500], b64.view(-1)[1500] = ref_value, ref_value
            out.view(-1)[1500] = out_value
            out.view(-1)[2100] = out_value  # also where the reference is finite
            check.both([out], [b32], [b64], ReferenceFacts())
            finite64 = b64.clone()
            finite64.view(-1)[1500] = 1.5
            check.gate3([out], [b32], [finite64], ReferenceFacts())
            near = b32.clone()  # close everywhere else: closeness decides, non-finite values too
            near.view(-1)[1500] = out_value
            check.gate3([near], [b32], [b64], ReferenceFacts(), **{**RULE, "abs_bound": INF})
    big = torch.full((1200,), 1e308, dtype=torch.float64)
    cand = big.clone()
    cand[5], cand[10] = INF, -1e308  # an infinite output before an overflowing difference
    check.both([cand], [big], [big], ReferenceFacts())
    inf_out = torch.full((1300,), INF)  # infinite everywhere, both sides
    check.both([inf_out.clone()], [inf_out], [inf_out.double()], ReferenceFacts())
    check.both([-inf_out], [inf_out], [inf_out.double()], ReferenceFacts())


def test_signed_zeros(check: Check) -> None:
    """-0.0 against 0.0 is no error; the worst element's values keep their signs."""
    ref = torch.zeros(2200)
    ref[::3] = -0.0
    out = -ref
    check.both([out], [ref], [ref.double()], ReferenceFacts())
    out[1001] = -1e-3
    out[1] = -0.0
    check.both([out], [ref], [ref.double()], ReferenceFacts())
    out[1001] = 5.0  # at a -0.0 reference: the worst reference value is -0.0
    check.both([out], [ref], [ref.double()], ReferenceFacts())
    check.both([-ref], [ref], None, ReferenceFacts())


def test_integer_and_bool_outputs(check: Check) -> None:
    """Integer and bool leaves are compared exactly; gate 3 leaves them out."""
    gen = torch.Generator().manual_seed(21)
    for dtype in (torch.int64, torch.int32, torch.int8, torch.uint8):
        ref = torch.randint(0, 100, (3, 700), generator=gen).to(dtype)
        check.both([ref.clone()], [ref], [ref], ReferenceFacts())
        bad = ref.clone()
        bad[2, 699] = 7 if int(bad[2, 699]) != 7 else 8
        bad[0, 3] = 100
        check.both([bad], [ref], [ref], ReferenceFacts())
    flags = torch.rand(2100, generator=gen) > 0.5
    check.both([flags.clone()], [flags], [flags], ReferenceFacts())
    check.both([~flags], [flags], [flags], ReferenceFacts())
    f_out, f32, f64 = _pair(gen, (1500,))
    check.both([f_out, ~flags], [f32, flags], [f64, flags], ReferenceFacts())  # mixed leaves
    check.gate3([flags.clone(), f_out], [flags, f32], [flags, f64], ReferenceFacts())


def test_zero_size_outputs(check: Check) -> None:
    """Empty leaves pass when their shape and dtype match, alone or beside others."""
    gen = torch.Generator().manual_seed(22)
    for shape in ((0,), (3, 0), (0, 1200)):
        empty = torch.zeros(shape)
        check.both([empty.clone()], [empty], [empty.double()], ReferenceFacts())
        check.gate3([empty.clone()], [empty], None, ReferenceFacts())
        check.gate2([torch.zeros(0, 4)], [empty], ReferenceFacts())
    out, b32, b64 = _pair(gen, (1400,))
    empty = torch.zeros(0)
    check.both(
        [empty, out + 1e-3, empty], [empty, b32, empty], [empty.double(), b64, empty.double()]
    )
    check.gate2([empty.double()], [empty], ReferenceFacts())
    check.gate2([torch.zeros(0, dtype=torch.int64)], [torch.zeros(0, dtype=torch.int64)])


def test_magnitudes_near_the_floors(check: Check) -> None:
    """References and errors around the floors the rules divide by or compare with.

    ``_TINY`` (1e-30) under the scale of a tiny output, gate 3's ``d_ref_floor``
    (1e-8) and ``abs_bound`` (1e-7), subnormals of either dtype.
    """
    gen = torch.Generator().manual_seed(23)
    for magnitude in (1e-30, 1e-38, 1e-44, 1e-300, 5e-324):
        for dtype in (torch.float32, torch.float64):
            b64 = magnitude * torch.randn(1100, generator=gen, dtype=torch.float64)
            b32 = b64.to(dtype)
            for out in (b32.clone(), b32 * 2, torch.zeros_like(b32), b32 + 1e-7):
                check.both([out], [b32], [b64], ReferenceFacts())
    base = torch.randn(2100, generator=gen, dtype=torch.float64)
    for d_ref in (0.0, 5e-9, 1e-8, 2e-8):
        b32 = base.float()
        b64 = b32.double()
        b64[700] += d_ref  # the baseline's own error, around the floor
        for err in (5e-8, 1e-7, 2e-7, 1e-6, 1e-4):
            out = b32.clone()
            out[1900] += err
            check.gate3([out], [b32], [b64], ReferenceFacts())
    zero = torch.zeros(1500)
    for err in (1e-30, 5e-8, 1e-7, 1.5e-7):  # an exact zero baseline: abs_bound decides
        check.both([zero + err], [zero], [zero.double()], ReferenceFacts())
        check.gate3([zero + err], [zero], None, ReferenceFacts())


def test_shape_and_dtype_mismatches(check: Check) -> None:
    """A leaf of another shape or dtype fails gate 2 on that alone; gate 3 on structure."""
    gen = torch.Generator().manual_seed(24)
    out, b32, b64 = _pair(gen, (6, 350))
    scalar = torch.tensor(1.25)
    for cand, ref in (
        (out.reshape(350, 6), b32),
        (out.reshape(1, 6, 350), b32),
        (out[:, :-1], b32),
        (torch.tensor([1.25]), scalar),
        (scalar.clone(), torch.tensor([1.25])),
        (out.half(), b32),
        (out.bfloat16(), b32),
        (out.double(), b32),
        (out.to(torch.int32), b32),
        (torch.arange(5, dtype=torch.int32), torch.arange(5)),
        (torch.ones(5, dtype=torch.uint8), torch.ones(5, dtype=torch.bool)),
    ):
        ref64 = ref.double() if ref.is_floating_point() else ref
        check.both([cand], [ref], [ref64], ReferenceFacts())
    check.gate3([out.half()], [b32], [b64], ReferenceFacts())  # gate 3 takes another dtype
    for other in ("1.25", None, [out]):  # not a tensor where one is expected
        check.gate2([other], [b32])
    check.gate2([out, 3], [b32, 3.0])
    check.gate2([out, 2], [b32, 3])
    check.gate3([out], [b32, b32], None)


def test_odd_layouts(check: Check) -> None:
    """Transposed, strided and broadcast outputs and references compare by their values."""
    gen = torch.Generator().manual_seed(25)
    out, b32, b64 = _pair(gen, (70, 45))
    check.both([out.t().contiguous().t()], [b32], [b64], ReferenceFacts())
    check.both([out.t()], [b32.t()], [b64.t()], ReferenceFacts())
    check.both([out[::2]], [b32[::2]], [b64[::2]], ReferenceFacts())
    row = b32[0]
    check.both([row.expand(40, 45)], [row.expand(40, 45).clone()], [b64[0].expand(40, 45)])
    wide = out.clone()
    wide[3, 4] += 1.0
    check.both([wide.t()], [b32.t()], [b64.t()], ReferenceFacts())


# -------------------------------------------------------------------------- the kept facts


def test_facts_follow_a_reference_changed_or_replaced(check: Check) -> None:
    gen = torch.Generator().manual_seed(9)
    out, b32, b64 = _pair(gen, (2500,))
    facts = ReferenceFacts()
    check.both([out], [b32], [b64], facts)
    b32.mul_(2)  # in place: the version counter moves, the facts are computed afresh
    b64.mul_(2)
    check.both([out], [b32], [b64], facts)
    check.both([out * 2], [b32], [b64], facts)
    b64[0] = NAN  # only the float64 baseline changes
    check.both([out * 2], [b32], [b64], facts)
    other = b32.clone()  # another reference object with other values
    other[100] += 1.0
    check.both([out * 2], [other], [b64], facts)


def test_gate_2_errors_are_reused_only_for_the_same_unchanged_output(check: Check) -> None:
    gen = torch.Generator().manual_seed(10)
    out, b32, b64 = _pair(gen, (3300,))
    facts = ReferenceFacts()
    check.gate2([out], [b32], facts)
    out.add_(0.01)  # changed after gate 2 compared it: gate 3 must not reuse gate 2's numbers
    g3 = check.gate3([out], [b32], [b64], facts)
    assert not g3["tolerance_pass"]
    twin = out.clone()  # equal values, another object
    check.gate2([out], [b32], facts)
    check.gate3([twin], [b32], [b64], facts)
    check.gate3([out], [b32], [b64], facts)


def test_finite_outputs_need_no_masks(check: Check, monkeypatch: pytest.MonkeyPatch) -> None:
    """Blocks without NaN or inf skip the masks (taking them would still be right, only slow)."""
    gen = torch.Generator().manual_seed(11)
    out, b32, b64 = _pair(gen, (4000,))

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a finite block took the masks")

    monkeypatch.setattr(numerics, "_masked_block", refuse)
    monkeypatch.setattr(numerics, "_concat", refuse)
    monkeypatch.setattr(reference_facts, "_linf_non_finite", refuse)
    facts = ReferenceFacts()
    check.both([out], [b32], [b64], facts)
    check.both([out + 5e-4], [b32], [b64], facts)


def test_model_verdict_from_sets_with_the_bundles_facts(check: Check) -> None:
    gen = torch.Generator().manual_seed(12)
    sets = []
    for name in ("seed0", "seed1", "heldout"):
        out, b32, b64 = _pair(gen, (2, 1700), noise=1e-5 if name == "heldout" else 1e-7)
        sets.append((name, [out], [b32], [b64]))
    settings = GateSettings()
    facts = ReferenceFacts()
    for s in sets:  # gate 2 first, as the cascade does
        compare_outputs(s[1], s[2], facts=facts, **TOL)
    kwargs = {"tolerance": 1e-4, "rho_max": 10.0, "settings": settings}
    got = model_verdict_from_sets(sets, facts=facts, **kwargs)
    plain = model_verdict_from_sets(sets, **kwargs)
    assert got.model_dump() == plain.model_dump()
    for name, o32, b32, b64 in sets:
        want = check.golden.expected(
            "model_error_rule",
            o32,
            b32,
            b64,
            tolerance=1e-4,
            rho_max=10.0,
            d_ref_floor=settings.d_ref_floor,
            abs_bound=settings.model_abs_bound,
        )
        entry = next(x for x in got.metrics["sets"] if x["set"] == name)
        assert same({k: v for k, v in entry.items() if k != "set"}, want)


def test_scratch_pool_lends_its_buffers_to_one_caller_at_a_time() -> None:
    pool = ScratchPool()
    with pool.take(10, 30) as first:
        assert [b.numel() for b in first] == [10, 30]
        with pool.take(10, 30) as second:  # busy: fresh buffers
            assert all(a.data_ptr() != b.data_ptr() for a in first for b in second)
        seen: list[list[torch.Tensor]] = []
        thread = threading.Thread(target=lambda: seen.append(_take(pool)))
        thread.start()
        thread.join()
        assert seen and all(a.data_ptr() != b.data_ptr() for a in first for b in seen[0])
    with pool.take(10, 30) as again:  # free again: the kept ones
        assert [b.data_ptr() for b in again] == [b.data_ptr() for b in first]
    with pool.take(5, 30, 20) as grown:  # the smallest that fits; one more allocated
        assert [b.numel() for b in grown] == [10, 30, 20]


def _take(pool: ScratchPool) -> list[torch.Tensor]:
    with pool.take(10, 30) as bufs:
        return bufs
