"""Gate 3's float64 rule on every timed call's samples: it catches a kernel less exact
than gate 3 allows in calls no round kept whole, and is never stricter than gate 3."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import torch

from gates.checked_calls import CheckedCalls, RotatingInputs
from gates.model_gate import model_verdict_from_sets, sampled_rule
from gates.protocol import OutputLeaf
from gates.reference_facts import ReferenceFacts
from gates.timed_checks import check_timed_calls
from kernelopt.contracts.verdicts import GateSettings

SETTINGS = GateSettings()
NAMES = ["s0", "s1", "s2"]
SHAPE = (48, 48)


def _inputs() -> list[torch.Tensor]:
    gen = torch.Generator().manual_seed(7)
    return [torch.randn(SHAPE, generator=gen) for _ in NAMES]


def _forward(x: torch.Tensor) -> torch.Tensor:
    """A few layers deep, so the fp32 result carries rounding error against float64."""
    return torch.tanh(x @ x / 8) @ x


def _record(tmp_path: Path, answer: Callable[[int, torch.Tensor], torch.Tensor]) -> Path:
    rotation = RotatingInputs([[x] for x in _inputs()])
    checks = CheckedCalls(
        expected=[OutputLeaf(shape=list(SHAPE), dtype="float32")], device="cpu", samples=64
    )
    for i in range(40):
        k, args = rotation.next()
        checks.record(answer(i, args[0]), k, args)
    path = tmp_path / "checks.pt"
    checks.save(path)
    return path


def _refs() -> tuple[dict[str, list[torch.Tensor]], dict[str, list[torch.Tensor]]]:
    xs = _inputs()
    return (
        {n: [_forward(x)] for n, x in zip(NAMES, xs, strict=True)},
        {n: [_forward(x.double())] for n, x in zip(NAMES, xs, strict=True)},
    )


def _check(path: Path, refs64: dict[str, list[torch.Tensor]] | None = None):
    refs, own64 = _refs()
    refs64 = own64 if refs64 is None else refs64
    facts = ReferenceFacts()
    return check_timed_calls(
        path,
        NAMES,
        refs,
        rtol=1e-3,
        atol=1e-3,
        scale_tol=2e-3,
        facts=facts,
        sampled=lambda name: sampled_rule(refs[name], refs64[name], SETTINGS, facts),
    )


def _gate3_fails(factor: float) -> bool:
    """Gate 3 on the whole outputs of ``_forward(x) * factor``, every set."""
    refs, refs64 = _refs()
    sets = [(n, [refs[n][0] * factor], refs[n], refs64[n]) for n in NAMES]
    verdict = model_verdict_from_sets(
        sets, tolerance=SETTINGS.model_tolerance, rho_max=SETTINGS.rho_max, settings=SETTINGS
    )
    return not verdict.passed


def test_the_honest_forward_passes(tmp_path: Path) -> None:
    result = _check(_record(tmp_path, lambda i, x: _forward(x)))
    assert result.ok, result.reason


def test_a_bias_within_gate_2_but_not_gate_3_in_a_few_calls_is_caught_by_samples(
    tmp_path: Path,
) -> None:
    # every fifth call 3e-4 off: gate 2's 1e-3 lets it through, and the two whole outputs
    # the round keeps would most likely miss it (no whole-output rule here at all)
    result = _check(
        _record(tmp_path, lambda i, x: _forward(x) * (1 + 3e-4) if i % 5 == 3 else _forward(x))
    )
    assert not result.ok and result.call_index == 3, result.reason
    assert "less exact than gate 3 allows" in result.reason
    assert _gate3_fails(1 + 3e-4)


@pytest.mark.parametrize("bias", [1e-7, 1e-6, 1e-5, 5e-5, 2e-4, 5e-4])
def test_samples_fail_only_where_gate_3_fails_the_whole_output(tmp_path: Path, bias: float) -> None:
    sampled_ok = _check(_record(tmp_path, lambda i, x: _forward(x) * (1 + bias))).ok
    assert sampled_ok or _gate3_fails(1 + bias)


def test_a_bias_within_gate_3_tolerance_passes_though_rho_is_large(tmp_path: Path) -> None:
    # 1e-5 relative: rho is far above 10, but the output is within gate 3's 1e-4
    # tolerance of the fp32 baseline, which passes gate 3 first
    assert not _gate3_fails(1 + 1e-5)
    result = _check(_record(tmp_path, lambda i, x: _forward(x) * (1 + 1e-5)))
    assert result.ok, result.reason


def test_sets_without_a_pairing_float64_reference_are_not_judged(tmp_path: Path) -> None:
    refs, _ = _refs()
    unpaired = {n: [refs[n][0].double().reshape(-1)[:10]] for n in NAMES}
    result = _check(_record(tmp_path, lambda i, x: _forward(x) * (1 + 3e-4)), refs64=unpaired)
    assert result.ok, result.reason


def test_timed_elements_the_float64_reference_excuses_are_not_wrong(tmp_path: Path) -> None:
    """A compiled fp16 chain lands several fp16 units from eager, nearer the float64
    reference: gate 2 excuses those elements, and so do the timed calls' checks; an element
    off from both is still wrong."""
    gen = torch.Generator().manual_seed(3)
    xs = [(torch.randn(SHAPE, generator=gen) * 0.004).half() for _ in NAMES]
    refs = {n: [(x * 1000).exp()] for n, x in zip(NAMES, xs, strict=True)}
    refs64 = {n: [(x.double() * 1000).exp()] for n, x in zip(NAMES, xs, strict=True)}

    def timed(answer: Callable[[int, torch.Tensor], torch.Tensor]) -> Path:
        rotation = RotatingInputs([[x] for x in xs])
        expected = [OutputLeaf(shape=list(SHAPE), dtype="float16")]
        checks = CheckedCalls(expected=expected, device="cpu", samples=256)
        for i in range(40):
            k, args = rotation.next()
            checks.record(answer(i, args[0]), k, args)
        checks.save(tmp_path / "checks.pt")
        return tmp_path / "checks.pt"

    def check(path: Path, paired: bool, gate3: bool = True) -> bool:
        facts = ReferenceFacts()
        tol = {"rtol": 1e-3, "atol": 1e-3, "scale_tol": 2e-3}
        return check_timed_calls(
            path,
            NAMES,
            refs,
            **tol,
            facts=facts,
            sampled=lambda name: (
                sampled_rule(refs[name], refs64[name], SETTINGS, facts)
                if paired and gate3
                else None
            ),
            refs64=refs64 if paired else None,
        ).ok

    def fused(i: int, x: torch.Tensor) -> torch.Tensor:
        return (x.float() * 1000).exp().half()

    assert not check(timed(fused), paired=False)
    assert check(timed(fused), paired=True)
    assert check(timed(fused), paired=True, gate3=False)  # a re-timing: gates 1-2 only
    assert not check(timed(lambda i, x: (fused(i, x).float() * 0.99).half()), paired=True)


def test_timed_integers_equal_to_the_float64_runs_are_not_wrong(tmp_path: Path) -> None:
    """Integers rounded from an fp16 chain: where eager's rounding moved one, an output that
    equals the float64 run's is excused, in the samples as in gate 2; another is wrong."""
    gen = torch.Generator().manual_seed(5)
    xs = [torch.randn(SHAPE, generator=gen).half() for _ in NAMES]

    def levels(x: torch.Tensor) -> torch.Tensor:
        return (torch.sin(x * 50) * 8).round().to(torch.int32)

    refs = {n: [levels(x)] for n, x in zip(NAMES, xs, strict=True)}
    refs64 = {n: [levels(x.double())] for n, x in zip(NAMES, xs, strict=True)}
    assert any(bool((refs[n][0] != refs64[n][0]).any()) for n in NAMES)

    def timed(answer: Callable[[torch.Tensor], torch.Tensor]) -> Path:
        rotation = RotatingInputs([[x] for x in xs])
        expected = [OutputLeaf(shape=list(SHAPE), dtype="int32")]
        checks = CheckedCalls(expected=expected, device="cpu", samples=SHAPE[0] * SHAPE[1])
        for _ in range(6):
            k, args = rotation.next()
            checks.record(answer(args[0]), k, args)
        checks.save(tmp_path / "checks.pt")
        return tmp_path / "checks.pt"

    def ok(answer: Callable[[torch.Tensor], torch.Tensor], paired: bool) -> bool:
        return check_timed_calls(
            timed(answer),
            NAMES,
            refs,
            rtol=1e-3,
            atol=1e-3,
            scale_tol=2e-3,
            facts=ReferenceFacts(),
            sampled=lambda name: None,
            refs64=refs64 if paired else None,
        ).ok

    def in_fp32(x: torch.Tensor) -> torch.Tensor:
        return levels(x.float())

    assert not ok(in_fp32, paired=False)
    assert ok(in_fp32, paired=True)
    assert not ok(lambda x: in_fp32(x) + (x > 2).to(torch.int32), paired=True)
