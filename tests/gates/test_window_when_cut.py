"""A gate child cut short (the worker shutting down, an activity cancelled) still has its
cache-guard window checked and closed, so the next candidate's guard never inherits an
open window from a process that is still alive."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import gates.cascade as cascade
from gates.perf import measure
from gates.reference import prepare_reference
from kernelopt.compiler_caches import read_window, window_file, worker_cache_dirs
from tests.support.adversarial import cpu_suite_settings

ROOT = Path(__file__).resolve().parents[2]
PROBLEM = ROOT / "tests" / "problems" / "gates" / "swish_bias.py"
CANDIDATE = ROOT / "tests" / "fixtures" / "candidates" / "gates" / "swish_fused.py"


def _cut(*_args: Any, **_kwargs: Any) -> Any:
    raise RuntimeError("the worker is shutting down")


def test_gates_1_to_3_close_the_window_of_a_child_cut_short(
    cpu_launcher: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for env, path in zip(
        ("TRITON_CACHE_DIR", "TORCHINDUCTOR_CACHE_DIR"),
        worker_cache_dirs(tmp_path / "caches", "node-a", "0"),
        strict=True,
    ):
        path.mkdir(parents=True)
        monkeypatch.setenv(env, str(path))
    settings = cpu_suite_settings()
    bundle = prepare_reference(PROBLEM, settings, tmp_path / "reference")
    record = window_file(bundle.caches.dirs)
    assert bundle.ok and record is not None
    monkeypatch.setattr(cascade, "run_job", _cut)
    with pytest.raises(RuntimeError, match="shutting down"):
        cascade.check_candidate(bundle, CANDIDATE, settings, tmp_path / "candidate")
    window = read_window(record)
    assert window is not None and not window.open


def test_timing_rounds_cut_short_run_the_bundles_check(tmp_path: Path) -> None:
    checks: list[str] = []

    def tampered_inputs() -> list[str]:
        checks.append("checked")
        return []

    with pytest.raises(AttributeError):  # the setup fails inside the first round
        measure(
            None,  # type: ignore[arg-type]
            None,  # type: ignore[arg-type]
            None,  # type: ignore[arg-type]
            workdir=tmp_path,
            tampered_inputs=tampered_inputs,
            before_candidate=lambda: None,
        )
    assert checks == ["checked"]


def test_gates_1_to_3_watch_the_caches_only_while_they_hold_the_gpu_lease(
    cpu_launcher: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An exclusive section (a compile that autotunes) rewrites the caches; a window armed
    before the lease is granted would blame the candidate for what ran while it waited."""
    settings = cpu_suite_settings()
    bundle = prepare_reference(PROBLEM, settings, tmp_path / "reference")
    assert bundle.ok
    held: list[bool] = []
    seen: list[tuple[str, bool]] = []

    @contextlib.contextmanager
    def section(mode: str, device: str, **_: Any) -> Iterator[None]:
        held.append(True)
        try:
            yield
        finally:
            held.pop()

    def noted(name: str, fn: Any) -> Any:
        def call() -> Any:
            seen.append((name, bool(held)))
            return fn()

        return call

    monkeypatch.setattr(cascade, "gpu_section", section)
    monkeypatch.setattr(bundle.caches, "arm", noted("arm", bundle.caches.arm))
    monkeypatch.setattr(bundle.caches, "check", noted("check", bundle.caches.check))
    result = cascade.check_candidate(bundle, CANDIDATE, settings, tmp_path / "candidate")
    assert [v.passed for v in result.verdicts][:2] == [True, True]
    assert seen[:2] == [("arm", True), ("check", True)]
