"""Gates 2 and 3's fast comparisons decide and report exactly as the straightforward ones.

The oracle is ``numerics_before`` (the rules spelled out over whole float64 copies,
as they were).  Every report is compared field by field, floats bit for bit:
verdicts, counts, maxima, indices, sums and messages.  Chunks and blocks are made
small so that a few thousand elements cross many of their boundaries.
"""

from __future__ import annotations

import math
import threading
from typing import Any

import pytest
import torch

import gates.numerics as numerics
import gates.reference_facts as reference_facts
from gates.model_gate import model_verdict_from_sets
from gates.numerics import compare_outputs, comparison_threads, model_error_rule
from gates.reference_facts import ReferenceFacts, ScratchPool
from kernelopt.contracts.verdicts import GateSettings
from tests.support import numerics_before as before

CHUNK = 1000
BLOCK = 300  # blocks that do not divide a chunk
TOL = {"rtol": 1e-3, "atol": 1e-3, "scale_tol": 2e-3}
RULE = {"tolerance": 1e-4, "rho_max": 10.0, "d_ref_floor": 1e-8, "abs_bound": 1e-7}
NAN, INF = float("nan"), float("inf")


@pytest.fixture(autouse=True)
def _small_chunks(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(numerics, "_CHUNK", CHUNK)
    monkeypatch.setattr(reference_facts, "BLOCK", BLOCK)
    monkeypatch.setattr(before, "_CHUNK", CHUNK)
    with comparison_threads():
        yield


def _same(a: Any, b: Any) -> bool:
    """Equal, floats bit for bit (NaN equals NaN, 0.0 does not equal -0.0)."""
    if isinstance(a, float) and isinstance(b, float):
        return math.copysign(1, a) == math.copysign(1, b) and (a == b or (a != a and b != b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and a == b


def _outcome(fn: Any, *args: Any, **kwargs: Any) -> Any:
    try:
        return fn(*args, **kwargs).as_dict()
    except Exception as exc:  # the old rules raise on some malformed inputs: so must the new
        return ("raised", type(exc).__name__)


def check_gate2(outs: list[Any], refs: list[Any], facts: ReferenceFacts | None = None, **tol):
    tol = tol or TOL
    want = _outcome(before.compare_outputs, outs, refs, **tol)
    got = _outcome(compare_outputs, outs, refs, facts=facts, **tol)
    assert _same(got, want), (got, want)
    return got


def check_gate3(o32, b32, b64, facts: ReferenceFacts | None = None, **rule):
    rule = rule or RULE
    want = _outcome(before.model_error_rule, o32, b32, b64, **rule)
    got = _outcome(model_error_rule, o32, b32, b64, facts=facts, **rule)
    assert _same(got, want), (got, want)
    return got


def check_both(outs, refs, refs64=None, facts: ReferenceFacts | None = None):
    """Gate 2 then gate 3 on the same objects, as the cascade calls them."""
    g2 = check_gate2(outs, refs, facts)
    o32 = [t for t in outs if hasattr(t, "shape")]
    b32 = [t for t in refs if hasattr(t, "shape")]
    b64 = [t for t in refs64 if hasattr(t, "shape")] if refs64 is not None else None
    g3 = check_gate3(o32, b32, b64, facts)
    return g2, g3


def _pair(gen: torch.Generator, shape: tuple[int, ...], noise: float = 1e-6):
    b64 = torch.randn(shape, generator=gen, dtype=torch.float64)
    b32 = b64.float()
    out = b32 + noise * torch.randn(shape, generator=gen)
    return out, b32, b64


# ------------------------------------------------------------------- honest and wrong values


def test_honest_outputs_over_many_chunks() -> None:
    gen = torch.Generator().manual_seed(0)
    facts = ReferenceFacts()
    out, b32, b64 = _pair(gen, (37, 211))
    g2, g3 = check_both([out], [b32], [b64], facts)
    assert g2["ok"] and g3["ok"] and g3["rule"] == "tolerance"
    for noise in (0.0, 1e-8, 1e-4, 3e-3, 1.0):  # more candidates against the same reference
        cand = b32 + noise * torch.randn(b32.shape, generator=gen)
        check_both([cand], [b32], [b64], facts)


def test_large_outputs_count_mismatches_and_closeness_element_by_element() -> None:
    """Errors above atol and above the model tolerance: the exact counting paths."""
    gen = torch.Generator().manual_seed(1)
    b64 = 1000 * torch.randn(5000, generator=gen, dtype=torch.float64)
    b32 = b64.float()
    for rel in (1e-7, 5e-7, 2e-6, 5e-4, 2e-3):
        out = b32 * (1 + rel * torch.randn(5000, generator=gen))
        check_both([out], [b32], [b64], ReferenceFacts())


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
def test_errors_on_the_tolerance_boundaries(dtype: torch.dtype, rtol: float, atol: float) -> None:
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
                check_gate2([out], [b32], ReferenceFacts(), **tol)
                check_gate3([out], [b32], [b64], ReferenceFacts(), **rule)
                check_gate3([out.double()], [b32], [b64], ReferenceFacts(), **rule)


def test_tolerances_outside_the_finite_path() -> None:
    """Negative or NaN tolerances: whatever the old rules did (raise or decide), the same."""
    gen = torch.Generator().manual_seed(13)
    _, b32, b64 = _pair(gen, (2100,))
    b32[5] = b64[5] = 0.0
    out = b32 + 5e-4  # every error under atol = 1e-3
    for value in (-1e-4, -1e-3, NAN, INF, 0.0):
        check_gate3([out], [b32], [b64], ReferenceFacts(), **{**RULE, "tolerance": value})
        check_gate2([out], [b32], ReferenceFacts(), rtol=value, atol=1e-3, scale_tol=1.0)
        check_gate2([out], [b32], ReferenceFacts(), rtol=1e-3, atol=value, scale_tol=1.0)


def test_tiny_outputs_and_zeros() -> None:
    gen = torch.Generator().manual_seed(3)
    b64 = 1e-5 * torch.randn(2500, generator=gen, dtype=torch.float64)
    b32 = b64.float()
    for out in (torch.zeros_like(b32), b32 * 0.5, b32.clone(), -b32):
        check_both([out], [b32], [b64], ReferenceFacts())
    zero = torch.zeros(2500)
    check_both([zero.clone()], [zero], [zero.double()], ReferenceFacts())
    check_both([zero + 1e-9], [zero], [zero.double()], ReferenceFacts())


def test_bias_at_depth_and_exact_baselines() -> None:
    torch.manual_seed(0)
    d = 64
    ws = [torch.randn(d, d) / math.sqrt(d) for _ in range(24)]
    x = torch.randn(48, d)

    def deep(x: torch.Tensor, ws: list[torch.Tensor], bias: float = 0.0) -> torch.Tensor:
        for w in ws:
            x = x + 0.1 * torch.tanh(x @ w) + bias
        return x

    b32 = deep(x, ws)
    b64 = deep(x.double(), [w.double() for w in ws])
    facts = ReferenceFacts()
    for bias in (0.0, 1e-6, 5e-5, 5e-4):
        _, g3 = check_both([deep(x, ws, bias)], [b32], [b64], facts)
    assert g3["rule"] == "rho" and not g3["ok"]
    exact = torch.randn(3001)  # the float64 baseline is the fp32 one: d_ref = 0
    for out in (exact.clone(), exact + 1e-3 * exact.abs().max(), exact + 1e-6):
        check_both([out], [exact], [exact.double()], ReferenceFacts())
    check_gate3([exact + 0.1], [exact], None, ReferenceFacts())  # no float64 baseline
    check_gate3([exact.clone()], [exact], None, ReferenceFacts())


# ------------------------------------------------------------------------ non-finite values


def test_poison_and_non_finite_outputs_where_the_baseline_is_finite() -> None:
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
        g2, g3 = check_both([cand], [b32], [b64], ReferenceFacts())
        assert not g2["ok"] and not g3["ok"]


def test_non_finite_references() -> None:
    gen = torch.Generator().manual_seed(5)
    out, b32, b64 = _pair(gen, (3000,))
    b32[10], b64[10] = NAN, NAN
    b32[1500], b64[1500] = INF, INF
    b32[2999], b64[2999] = -INF, -INF
    facts = ReferenceFacts()
    for cand in (b32.clone(), out, torch.where(b32.isfinite(), out, b32)):
        check_both([cand], [b32], [b64], facts)
    only64 = b64.clone()
    only64[7] = NAN  # the float64 baseline alone is not finite
    check_both([b32 + 1e-6], [b32], [only64], ReferenceFacts())
    huge = torch.full((1200,), 1e308, dtype=torch.float64)  # differences overflow to inf
    check_both([-huge], [huge], [huge], ReferenceFacts())
    all_nan = torch.full((1500,), NAN)  # no finite value: the old rule raises, so must the new
    check_both([all_nan.clone()], [all_nan], [all_nan.double()], ReferenceFacts())


# ----------------------------------------------------------------- structure and leaf kinds


def test_structure_shapes_dtypes_and_leaf_kinds() -> None:
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
    check_both(outs, refs, refs64, facts)
    check_both(outs, refs, refs64, facts)  # again: the kept facts
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
        check_gate2(cand, refs, facts)
        o32 = [t for t in cand if hasattr(t, "shape")]
        check_gate3(o32, [t for t in refs if hasattr(t, "shape")], None, facts)
        check_gate3(
            o32,
            [t for t in refs if hasattr(t, "shape")],
            [t for t in refs64 if hasattr(t, "shape")],
            facts,
        )
    check_gate3([out], [b32], [b64, b64], facts)  # a float64 baseline of another structure
    check_gate3([out], [b32], [b64[:25]], facts)
    check_gate3([out], [b32], [b64.float()], facts)  # float64 baseline in fp32


def test_complex_and_bfloat16_outputs() -> None:
    gen = torch.Generator().manual_seed(7)
    c = torch.randn(1500, generator=gen, dtype=torch.complex64)
    with pytest.warns(UserWarning):  # the real part is compared, as it always was
        check_gate2([c + 1e-4], [c], ReferenceFacts())
    bf = torch.randn(2200, generator=gen).bfloat16()
    check_both([bf + 0.01], [bf], [bf.double()], ReferenceFacts())


def test_worst_element_ties_across_and_within_chunks() -> None:
    ref = torch.zeros(5000)
    out = ref.clone()
    out[4321] = out[1234] = out[1240] = 0.5  # first holder: chunk 1, index 1234
    out[3000] = -0.5
    g2 = check_gate2([out], [ref], ReferenceFacts())
    assert g2["leaves"][0]["worst_index"] == [1234]
    out[6 - 1] = NAN  # a straightforward chunk before the finite one that holds the max
    check_gate2([out], [ref], ReferenceFacts())
    out[5] = 0.5
    check_gate2([out], [ref], ReferenceFacts())


def test_random_outputs_against_the_straightforward_rules() -> None:
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
        check_gate2([out], [b32], facts, scale_tol=2e-3, **tol)
        check_gate3([out], [b32], [b64], facts)
        check_gate3([out], [b32], None, facts)


# -------------------------------------------------------------------------- the kept facts


def test_facts_follow_a_reference_changed_or_replaced() -> None:
    gen = torch.Generator().manual_seed(9)
    out, b32, b64 = _pair(gen, (2500,))
    facts = ReferenceFacts()
    check_both([out], [b32], [b64], facts)
    b32.mul_(2)  # in place: the version counter moves, the facts are computed afresh
    b64.mul_(2)
    check_both([out], [b32], [b64], facts)
    check_both([out * 2], [b32], [b64], facts)
    b64[0] = NAN  # only the float64 baseline changes
    check_both([out * 2], [b32], [b64], facts)
    other = b32.clone()  # another reference object with other values
    other[100] += 1.0
    check_both([out * 2], [other], [b64], facts)


def test_gate_2_errors_are_reused_only_for_the_same_unchanged_output() -> None:
    gen = torch.Generator().manual_seed(10)
    out, b32, b64 = _pair(gen, (3300,))
    facts = ReferenceFacts()
    check_gate2([out], [b32], facts)
    out.add_(0.01)  # changed after gate 2 compared it: gate 3 must not reuse gate 2's numbers
    g3 = check_gate3([out], [b32], [b64], facts)
    assert not g3["tolerance_pass"]
    twin = out.clone()  # equal values, another object
    check_gate2([out], [b32], facts)
    check_gate3([twin], [b32], [b64], facts)
    check_gate3([out], [b32], [b64], facts)


def test_finite_outputs_take_the_fast_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """The fast path is really taken (a fallback would still be right, only slow)."""
    gen = torch.Generator().manual_seed(11)
    out, b32, b64 = _pair(gen, (4000,))

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the straightforward path was taken")

    monkeypatch.setattr(numerics, "_plain_chunk", refuse)
    monkeypatch.setattr(numerics, "_plain_model_numbers", refuse)
    monkeypatch.setattr(numerics, "_concat", refuse)
    facts = ReferenceFacts()
    check_both([out], [b32], [b64], facts)
    check_both([out + 5e-4], [b32], [b64], facts)


def test_model_verdict_from_sets_with_the_bundles_facts() -> None:
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
        want = before.model_error_rule(
            o32,
            b32,
            b64,
            tolerance=1e-4,
            rho_max=10.0,
            d_ref_floor=settings.d_ref_floor,
            abs_bound=settings.model_abs_bound,
        )
        entry = next(x for x in got.metrics["sets"] if x["set"] == name)
        assert _same({k: v for k, v in entry.items() if k != "set"}, want.as_dict())


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
