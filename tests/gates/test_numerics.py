"""Gate 2 comparison and the V_model float64 rule, on synthetic tensors."""

from __future__ import annotations

import math

import pytest
import torch

from gates.numerics import compare_outputs, compare_tensor, comparison_threads, model_error_rule

TOL = {"rtol": 1e-3, "atol": 1e-3, "scale_tol": 2e-3}


def test_identical_outputs_pass() -> None:
    x = torch.randn(64, 32)
    c = compare_tensor(0, x.clone(), x, **TOL)
    assert c.ok and c.max_abs_err == 0 and c.unwritten == 0


def test_shape_and_dtype_must_match() -> None:
    x = torch.randn(4, 4)
    assert "shape" in compare_tensor(0, x.reshape(16), x, **TOL).problem
    assert "dtype" in compare_tensor(0, x.double(), x, **TOL).problem


def test_nan_poison_counts_as_unwritten() -> None:
    ref = torch.randn(100)
    out = ref.clone()
    out[60:] = float("nan")
    c = compare_tensor(0, out, ref, **TOL)
    assert not c.ok and c.unwritten == 40 and "never written" in c.problem


def test_inf_where_reference_is_finite_fails() -> None:
    ref = torch.randn(10)
    out = ref.clone()
    out[3] = float("inf")
    c = compare_tensor(0, out, ref, **TOL)
    assert not c.ok and c.nonfinite == 1


def test_reference_nans_must_be_reproduced() -> None:
    ref = torch.tensor([1.0, float("nan"), 3.0])
    assert compare_tensor(0, ref.clone(), ref, **TOL).ok
    assert not compare_tensor(0, torch.tensor([1.0, 2.0, 3.0]), ref, **TOL).ok


def test_zeros_pass_allclose_but_not_the_scale_aware_error() -> None:
    ref = torch.randn(1000) * 1e-5
    assert torch.allclose(torch.zeros_like(ref), ref, rtol=1e-3, atol=1e-3)
    c = compare_tensor(0, torch.zeros_like(ref), ref, **TOL)
    assert not c.ok and c.mismatched == 0 and c.scale_err == pytest.approx(1.0)


def test_honest_fp32_rounding_passes_with_tiny_scale_error() -> None:
    torch.manual_seed(0)
    a = torch.randn(64, 256)
    b = torch.randn(256, 64)
    ref = (a.double() @ b.double()).float()
    out = a @ b
    c = compare_tensor(0, out, ref, **TOL)
    assert c.ok and c.scale_err < 1e-5


def test_value_errors_report_the_worst_element() -> None:
    ref = torch.zeros(3, 3)
    out = ref.clone()
    out[1, 2] = 0.5
    c = compare_tensor(0, out, ref, **TOL)
    assert not c.ok and c.worst_index == [1, 2] and c.worst_value == 0.5


def test_integer_outputs_compare_exactly() -> None:
    ref = torch.arange(10)
    assert compare_tensor(0, ref.clone(), ref, **TOL).ok
    bad = ref.clone()
    bad[0] = 5
    assert compare_tensor(0, bad, ref, **TOL).mismatched == 1


def test_structure_mismatch() -> None:
    x = torch.randn(3)
    assert not compare_outputs([x], [x, x], **TOL).ok
    assert not compare_outputs([1.0], [x], **TOL).ok
    assert compare_outputs([x, 2], [x, 2], **TOL).ok


# ---------------------------------------------------------------------------- V_model


def _deep(x: torch.Tensor, ws: list[torch.Tensor], bias: float = 0.0) -> torch.Tensor:
    for w in ws:
        x = x + 0.1 * torch.tanh(x @ w) + bias
    return x


def _model_case(bias: float, depth: int = 32) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    torch.manual_seed(0)
    d = 64
    ws = [torch.randn(d, d) / math.sqrt(d) for _ in range(depth)]
    x = torch.randn(16, d)
    b32 = _deep(x, ws)
    b64 = _deep(x.double(), [w.double() for w in ws])
    o32 = _deep(x, ws, bias)
    return o32, b32, b64


RULE = {"tolerance": 1e-4, "rho_max": 10.0, "d_ref_floor": 1e-8, "abs_bound": 1e-7}


def test_bias_per_stage_gives_rho_in_the_hundreds() -> None:
    o32, b32, b64 = _model_case(bias=5e-4)
    r = model_error_rule([o32], [b32], [b64], **RULE)
    assert not r.ok and r.rule == "rho" and r.rho is not None and r.rho > 100


def test_honest_reordering_lands_at_small_rho() -> None:
    _, b32, b64 = _model_case(bias=0.0)
    # An honest kernel: same maths, different rounding (computed through float64 and back
    # would be *better*; perturb by a few ulps instead).
    o32 = b32 * (1 + 2 * torch.finfo(torch.float32).eps * torch.randn_like(b32).sign())
    r = model_error_rule([o32], [b32], [b64], **RULE)
    assert r.ok
    assert r.rho is None or r.rho < 10


def test_exact_baseline_falls_back_to_scale_relative() -> None:
    x = torch.randn(100)
    b64 = [x.double()]
    r = model_error_rule([x.clone()], [x], b64, **RULE)
    assert r.ok and r.d_ref == 0.0
    off = x + 1e-3 * x.abs().max()
    r2 = model_error_rule([off], [x], b64, **RULE)
    assert not r2.ok and r2.rule == "scale_relative"


def test_tiny_outputs_cannot_pass_v_model_as_zeros() -> None:
    ref = torch.randn(100) * 1e-5
    r = model_error_rule([torch.zeros_like(ref)], [ref], [ref.double()], **RULE)
    assert not r.ok


def test_non_finite_outputs_fail_v_model() -> None:
    ref = torch.randn(10)
    out = ref.clone()
    out[0] = float("nan")
    assert model_error_rule([out], [ref], [ref.double()], **RULE).rule == "structure"


def test_infinities_the_baseline_has_are_reproduced_not_errors() -> None:
    """A masked fill of -inf, or an fp16 exp that overflows where float64 does not: the
    baseline's own infinities, reproduced exactly, are no error (they were inf - inf)."""
    b64 = torch.tensor([-math.inf, 1.0, 2.0, 7e5, 3.0], dtype=torch.float64)
    b32 = torch.tensor([-math.inf, 1.0, 2.0, math.inf, 3.0])  # overflowed where b64 did not
    r = model_error_rule([b32.clone()], [b32], [b64], **RULE)
    assert r.ok and r.rule == "tolerance", r.reason
    # off elsewhere: the rho rule decides on the finite positions (rho 2 here)
    honest = b32.clone()
    honest[1:3] += torch.tensor([-2e-3, 2e-3])
    b32_rounded = b32.clone()
    b32_rounded[1:3] += torch.tensor([1e-3, 1e-3])
    r = model_error_rule([honest], [b32_rounded], [b64], **RULE)
    assert r.rule == "rho" and r.d_ref is not None and math.isfinite(r.d_ref), r.reason
    assert r.ok, r.reason


def test_an_infinity_of_the_other_sign_or_where_the_baseline_is_finite_fails() -> None:
    b64 = torch.tensor([-math.inf, 1.0, 2.0], dtype=torch.float64)
    b32 = b64.float()
    flipped = b32.clone()
    flipped[0] = math.inf
    assert not model_error_rule([flipped], [b32], [b64], **RULE).ok
    spread = b32.clone()
    spread[1] = -math.inf
    assert model_error_rule([spread], [b32], [b64], **RULE).rule == "structure"
    # finite where the baseline and float64 are infinite: an infinite error
    tamed = b32.clone()
    tamed[0] = -3e38
    assert not model_error_rule([tamed], [b32], [b64], **RULE).ok


def test_without_float64_the_fp32_baseline_is_used() -> None:
    ref = torch.randn(10)
    assert model_error_rule([ref.clone()], [ref], None, **RULE).ok
    assert not model_error_rule([ref + 0.1], [ref], None, **RULE).ok


def _whole_tensor(out: torch.Tensor, ref: torch.Tensor, rtol: float, atol: float) -> dict:
    """The rules of compare_tensor written over the whole tensor at once (the oracle)."""
    o, r = out.double(), ref.double()
    ref_finite, out_nan = torch.isfinite(r), torch.isnan(o)
    both = ref_finite & torch.isfinite(o)
    err = torch.where(both, (o - r).abs(), torch.zeros_like(r))
    r_fin = torch.where(ref_finite, r, torch.zeros_like(r))
    max_err = float(err.max())
    hits = (err == max_err).nonzero()
    return {
        "unwritten": int((out_nan & ref_finite).sum()),
        "nonfinite": int((~torch.isfinite(o) & ~out_nan & ref_finite).sum()),
        "mismatched": int(((~both | (err > atol + rtol * r.abs())) & ref_finite).sum()),
        "max_abs_err": max_err,
        "ref_max_abs": float(r_fin.abs().max()),
        "ref_rms": float(r_fin.pow(2).mean().sqrt()),
        "rel_l2_err": float(err.norm()) / float(r_fin.norm()),
        "worst_index": [int(v) for v in hits[0]] if max_err > 0 else [],
    }


def test_chunked_comparison_matches_the_whole_tensor_rules(monkeypatch) -> None:
    """Chunk boundaries change nothing: counts and maxima exactly, sums to rounding."""
    import gates.numerics as numerics

    monkeypatch.setattr(numerics, "_CHUNK", 1000)  # many chunks, boundaries mid-row
    gen = torch.Generator().manual_seed(7)
    ref = torch.randn(7, 13, 31, generator=gen)
    out = ref + 1e-3 * torch.randn(ref.shape, generator=gen)
    out[0, 0, :5] = float("nan")  # unwritten poison in the first chunk
    out[3, 2, 7] = float("inf")  # non-finite where the reference is finite
    ref[5, 1, 1] = float("nan")  # reference NaN, not reproduced
    ref[6, 12, 30], out[6, 12, 30] = 1.0, 1.5  # the worst error, in the last chunk
    ref[2, 0, 0], out[2, 0, 0] = 1.0, 0.5  # the same error earlier: the first is the worst
    got = compare_tensor(0, out, ref, rtol=1e-3, atol=1e-3, scale_tol=1e-3)
    want = _whole_tensor(out, ref, 1e-3, 1e-3)
    for key in ("unwritten", "nonfinite", "mismatched", "max_abs_err", "ref_max_abs"):
        assert getattr(got, key) == want[key], key
    assert got.worst_index == want["worst_index"] == [2, 0, 0]
    assert got.worst_value == float(out[2, 0, 0]) and got.worst_ref == float(ref[2, 0, 0])
    for key in ("ref_rms", "rel_l2_err"):
        assert abs(getattr(got, key) - want[key]) <= 1e-12 * want[key], key
    assert not got.ok and got.unwritten == 5


def test_chunked_comparison_of_a_transposed_output_and_a_scalar() -> None:
    """Flat order is the logical row-major order, whatever the strides; 0-d works."""
    ref = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    out = ref.t().contiguous().t().clone()  # same values, column-major strides
    out[1, 2] += 0.25
    got = compare_tensor(0, out, ref, rtol=1e-3, atol=1e-3, scale_tol=1e-3)
    assert got.worst_index == [1, 2] and got.mismatched == 1
    scalar = compare_tensor(0, torch.tensor(2.0), torch.tensor(1.0), rtol=0, atol=0, scale_tol=0)
    assert not scalar.ok and scalar.max_abs_err == 1.0 and scalar.worst_index == []


def test_comparison_threads_limits_and_restores_torch_threads():
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        with comparison_threads():
            assert torch.get_num_threads() == 1
            ok = compare_tensor(0, torch.ones(5), torch.ones(5), rtol=0, atol=0, scale_tol=0)
        assert ok.ok
        assert torch.get_num_threads() == 2
        with pytest.raises(ValueError), comparison_threads():
            raise ValueError("a failing comparison still restores the count")
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)


def test_complex_outputs_are_compared_part_by_part() -> None:
    """An FFT with its imaginary parts zeroed kept every real part: both gates reject it."""
    spectrum = torch.fft.rfft(torch.randn(4, 16), dim=-1)
    zeroed = torch.complex(spectrum.real, torch.zeros_like(spectrum.imag))
    assert compare_outputs([spectrum.clone()], [spectrum], **TOL).ok
    gate2 = compare_outputs([zeroed], [spectrum], **TOL)
    assert not gate2.ok and gate2.leaves[0].worst_index[-1] == 1  # an imaginary part
    exact = spectrum.to(torch.complex128)
    assert model_error_rule([spectrum.clone()], [spectrum], [exact], **RULE).ok
    assert not model_error_rule([zeroed], [spectrum], [exact], **RULE).ok


def test_python_float_outputs_are_compared_within_tolerance() -> None:
    """``.item()`` outputs: an honest sum in another order passed only bit for bit, and a
    NaN never equalled itself; the model gate sees them too."""
    from gates.model_gate import model_verdict_from_sets
    from kernelopt.contracts.verdicts import GateSettings

    assert compare_outputs([0.30000001], [0.3], **TOL).ok
    assert not compare_outputs([0.31], [0.3], **TOL).ok
    assert compare_outputs([math.nan], [math.nan], **TOL).ok
    assert not compare_outputs([True], [1.0], **TOL).ok  # a bool is no number here
    assert compare_outputs([1], [1.0], **TOL).ok
    assert compare_outputs([3], [3], **TOL).ok and not compare_outputs([3], [4], **TOL).ok

    def gate3(out: float) -> bool:
        sets = [("s", [out], [0.3000001], [0.3])]
        return model_verdict_from_sets(
            sets, tolerance=1e-4, rho_max=10.0, settings=GateSettings()
        ).passed

    assert gate3(0.3000001) and not gate3(0.3003)


def test_a_bfloat16_output_may_be_one_unit_away_but_not_two() -> None:
    """bfloat16 keeps 8 bits: a kernel that rounds once more or less than eager is one unit
    in the last place (0.4-0.8 %) off, which gate 2's 1e-3 refused; a bias is not."""
    torch.manual_seed(0)
    exact = torch.randn(4096, dtype=torch.float64) * 3
    ref = exact.to(torch.bfloat16)
    up = (ref.view(torch.int16) + 1).view(torch.bfloat16)  # the next value away from zero
    one_unit = torch.where(torch.arange(4096) % 7 == 0, up, ref)
    assert compare_outputs([one_unit], [ref], **TOL).ok
    two_units = (ref.view(torch.int16) + 2).view(torch.bfloat16)
    assert not compare_outputs(
        [torch.where(torch.arange(4096) == 5, two_units, ref)], [ref], **TOL
    ).ok
    biased = (exact * 1.01).to(torch.bfloat16)
    assert not compare_outputs([biased], [ref], **TOL).ok
    half = exact.to(torch.float16)  # fp16's unit is within the 1e-3 already: unchanged rule
    assert not compare_outputs([(exact * 1.003).to(torch.float16)], [half], **TOL).ok


def test_elements_closer_than_the_reference_to_float64_are_excused() -> None:
    """Eager rounds an fp16 chain's intermediate to fp16 before the exp; a compiler that
    keeps it in fp32 lands several fp16 units away from eager and nearer the model's
    function.  The float64 reference excuses those elements, and only those."""
    torch.manual_seed(0)
    x = torch.randn(16, 32).half() * 0.011
    exact = (x.double() * 1000).exp()
    eager = (x * 1000).exp()
    fused = (x.float() * 1000).exp().half()
    plain = compare_outputs([fused], [eager], **TOL)
    assert not plain.ok and plain.leaves[0].mismatched
    excused = compare_outputs([fused], [eager], **TOL, refs64=[exact])
    assert excused.ok and excused.excused == plain.leaves[0].mismatched
    wrong = fused.clone().reshape(-1)
    top = int(torch.where(wrong.isfinite(), wrong, 0).argmax())
    wrong[top] = wrong[top] * 0.99  # off from both: not excused
    still = compare_outputs([wrong.view(16, 32)], [eager], **TOL, refs64=[exact])
    assert not still.ok and still.leaves[0].worst_index == [top // 32, top % 32]


def test_float64_excuses_no_element_farther_from_it_than_the_reference() -> None:
    """Within tolerance of float64 is not enough: the element must be no farther from it
    than the reference, so a kernel cannot trade the reference's side for the other."""
    exact = torch.tensor([1.0, 1000.0, 3.0], dtype=torch.float64)
    ref = torch.tensor([1.0, 1000.0 * (1 - 0.0009), 3.0])
    other_side = torch.tensor([1.0, 1000.0 * (1 + 0.00095), 3.0])
    assert not compare_outputs([other_side], [ref], **TOL, refs64=[exact]).ok
    nearer = torch.tensor([1.0, 1000.0 * (1 + 0.0005), 3.0])
    assert compare_outputs([nearer], [ref], **TOL, refs64=[exact]).excused == 1


def test_a_reference_overflow_that_float64_does_not_have_is_excused() -> None:
    """Eager's fp16 intermediate overflows to inf where float64 stays finite: a finite
    value close to float64 is no error, inf or a far value still is."""
    exact = torch.tensor([1.0, 300.0], dtype=torch.float64)
    ref = torch.tensor([1.0, float("inf")], dtype=torch.float16)
    good = torch.tensor([1.0, 300.0], dtype=torch.float16)
    assert not compare_outputs([good], [ref], **TOL).ok
    assert compare_outputs([good], [ref], **TOL, refs64=[exact]).ok
    far = torch.tensor([1.0, 200.0], dtype=torch.float16)
    assert not compare_outputs([far], [ref], **TOL, refs64=[exact]).ok
    poison = torch.tensor([float("nan"), 300.0], dtype=torch.float16)
    assert not compare_outputs([poison], [ref.clone().fill_(1.0)], **TOL, refs64=[exact]).ok


def test_a_failure_of_the_scale_rule_alone_is_excused_where_float64_sides_with_the_output() -> None:
    """Every element within tolerance (an atol grown as on the widened set), but a few fp16
    units apart at the output's peak: the scale-relative rule fails on eager's rounding, and
    elements as near float64 as eager's are excused; one farther from float64 still fails."""
    tol = {**TOL, "atol": 0.05}
    exact = torch.tensor([8.1796875 + 0.01, 1.0, -2.0], dtype=torch.float64)
    eager = torch.tensor([8.1796875 + 0.03125, 1.0, -2.0], dtype=torch.float16)
    nearer = torch.tensor([8.1796875, 1.0, -2.0], dtype=torch.float16)
    plain = compare_outputs([nearer], [eager], **tol)
    assert not plain.ok and not plain.leaves[0].mismatched  # the scale rule alone
    excused = compare_outputs([nearer], [eager], **tol, refs64=[exact])
    assert excused.ok and excused.excused == 1
    farther = torch.tensor([8.1796875 + 0.0625, 1.0, -2.0], dtype=torch.float16)
    assert not compare_outputs([farther], [eager], **tol, refs64=[exact]).ok


def test_an_integer_or_boolean_equal_to_the_float64_runs_is_excused() -> None:
    """A threshold and a rounding of an fp16 chain: where eager's rounding moved a value
    across, the output that equals the float64 run's is excused; any other is not."""
    torch.manual_seed(1)
    x = torch.randn(64, 64).half()
    eager, exact, fp32 = torch.sin(x * 50), torch.sin(x.double() * 50), torch.sin(x.float() * 50)
    for leaf in (lambda y: y > 0.5, lambda y: (y * 8).round().to(torch.int32)):
        ref, ref64, out = leaf(eager), leaf(exact), leaf(fp32)
        assert not compare_outputs([out], [ref], **TOL).ok
        excused = compare_outputs([out], [ref], **TOL, refs64=[ref64])
        assert excused.ok and excused.excused == int((out != ref).sum())
        wrong = out.clone().reshape(-1)
        wrong[0] = ~wrong[0] if wrong.dtype == torch.bool else wrong[0] + 3
        assert not compare_outputs([wrong.view(out.shape)], [ref], **TOL, refs64=[ref64]).ok
