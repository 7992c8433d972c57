"""What ``kernelopt verify`` says a check cost: the reference counted once, and in the wall."""

from __future__ import annotations

import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from kernelopt.contracts.verdicts import CascadeResult, GateSettings

TESTS = Path(__file__).resolve().parents[2]
PROBLEM = TESTS / "problems" / "gates" / "swish_bias.py"
CANDIDATES = TESTS / "fixtures" / "candidates" / "gates"


def test_a_single_verify_counts_the_reference_in_its_wall_time(
    tmp_path: Path, cpu_launcher: bool
) -> None:
    from gates.cascade import verify_candidate

    settings = GateSettings(device="cpu", run_perf=False)
    started = time.monotonic()
    result = verify_candidate(PROBLEM, CANDIDATES / "swish_fused.py", settings, workdir=tmp_path)
    elapsed = time.monotonic() - started
    # the reference is about half of this check: without it the wall would fall far short
    assert result.accepted and 0.9 * elapsed <= result.wall_seconds <= elapsed


def test_a_batch_charges_its_shared_reference_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import kernelopt.cli.verify_batch as batch
    from kernelopt.cli.verify_batch import verify_batch

    bundle = SimpleNamespace(gpu_seconds=5.0)  # a GPU reference's device-seconds

    def judged(_bundle: object, path: Path, *_: object) -> CascadeResult:
        # as the cascade reports one verdict: its own 2 s plus the reference it used
        return CascadeResult(
            problem=str(PROBLEM), candidate=str(path), verdicts=[], accepted=True,
            gpu_seconds=bundle.gpu_seconds + 2.0,
        )  # fmt: skip

    monkeypatch.setattr(batch, "prepare_reference", lambda *_: bundle)
    monkeypatch.setattr(batch, "check_candidate", judged)
    names = ("swish_fused", "lazy_output", "partial_write")
    paths = [CANDIDATES / f"{name}.py" for name in names]
    settings = GateSettings(device="cpu", run_perf=False)
    results, reference_s = verify_batch(PROBLEM, paths, settings, tmp_path)
    assert reference_s == 5.0 and [r.gpu_seconds for r in results] == [2.0, 2.0, 2.0]
    assert {r.environment["shared_reference_gpu_seconds"] for r in results} == {5.0}


def test_a_batch_reports_every_rejection_by_gates_1_to_3_before_it_times_anything(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import kernelopt.cli.verify_batch as batch
    from kernelopt.cli.verify_batch import verify_batch

    bundle = SimpleNamespace(gpu_seconds=1.0)
    calls: list[str] = []
    good = {"swish_fused", "swish_fused_copy"}

    def checked(_bundle: object, path: Path, *_: object) -> CascadeResult:
        calls.append(f"check {Path(path).stem}")
        return CascadeResult(
            problem=str(PROBLEM), candidate=str(path), verdicts=[],
            accepted=Path(path).stem in good, gpu_seconds=bundle.gpu_seconds + 1.0,
        )  # fmt: skip

    def timed(result: CascadeResult, *_: object, **__: object) -> CascadeResult:
        calls.append(f"time {Path(result.candidate).stem}")
        return result.model_copy(update={"gpu_seconds": result.gpu_seconds + 3.0})

    monkeypatch.setattr(batch, "prepare_reference", lambda *_: bundle)
    monkeypatch.setattr(batch, "check_candidate", checked)
    monkeypatch.setattr(batch, "time_candidate", timed)
    (tmp_path / "c").mkdir()
    copy = tmp_path / "c" / "swish_fused_copy.py"
    copy.write_text((CANDIDATES / "swish_fused.py").read_text())
    paths = [CANDIDATES / "swish_fused.py", CANDIDATES / "lazy_output.py", copy]
    paths += [CANDIDATES / "partial_write.py"]
    landed: list[str] = []
    stages: list[str] = []
    settings = GateSettings(device="cpu", run_perf=True)
    results, _ = verify_batch(
        PROBLEM, paths, settings, tmp_path / "w", lambda r: landed.append(Path(r.candidate).stem),
        stages.append, lambda: calls.append("zygote ready"),
    )  # fmt: skip
    # gates 1-3 for all four first, then the two that passed are timed, in their order
    assert calls == [
        "zygote ready", "check swish_fused", "check lazy_output", "check swish_fused_copy",
        "check partial_write", "time swish_fused", "time swish_fused_copy",
    ]  # fmt: skip
    assert landed == ["lazy_output", "partial_write", "swish_fused", "swish_fused_copy"]
    # the results keep the order the candidates were given in, each with its own cost
    assert [Path(r.candidate).stem for r in results] == [p.stem for p in paths]
    assert [r.gpu_seconds for r in results] == [4.0, 1.0, 4.0, 1.0]
    assert stages[0].startswith("the shared reference took")
    assert stages[1] == "2 passed gates 1-3: timing them one at a time"


def test_a_single_verify_waits_for_its_zygote_only_once_the_reference_is_ready(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import gates.cascade as cascade

    calls: list[str] = []
    bundle = SimpleNamespace(gpu_seconds=1.0)

    def prepared(*_: object) -> object:
        calls.append("reference")
        return bundle

    def gated(*_: object) -> CascadeResult:
        calls.append("gates")
        return CascadeResult(problem=str(PROBLEM), candidate="c", verdicts=[], accepted=False)

    monkeypatch.setattr(cascade, "prepare_reference", prepared)
    monkeypatch.setattr(cascade, "_gates_on_reference", gated)
    settings = GateSettings(device="cpu", run_perf=False)
    cascade.verify_candidate(
        PROBLEM, CANDIDATES / "swish_fused.py", settings, workdir=tmp_path,
        before_gates=lambda: calls.append("zygote ready"),
    )  # fmt: skip
    assert calls == ["reference", "zygote ready", "gates"]
