"""A re-stitch keeps a model's output out of the store, so the home it leaves stays movable.

Row softmax over 4096 x 8192 (the H200 capture of level1_009_softmax_rows): its
output is 128 MiB, as large as its input.  The re-stitch compares it with the
reference in memory; stored, it would be the one blob a thin export neither
leaves out nor draws again, and the packed home would no longer fit a device
call's return.  The wrapper runs on the CPU here (the activity itself asks for
CUDA), so the test moves its tensors to the CPU and skips the CUDA set-up.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest
import torch

import kernelopt.compile.runtime as runtime
from kernelopt.compile.restitch import restitch
from kernelopt.compile.runtime import save_tensors
from kernelopt.config import Settings
from kernelopt.contracts.compiled import (
    CompileResult,
    Replacement,
    RestitchInput,
    RestitchResult,
    SearchTarget,
    TargetKind,
)
from kernelopt.state_transfer import DB_NAME, import_state, read_manifest
from kernelopt.store import ArtifactStore, open_store
from kernelopt.thin_home import REDRAWN_FIELDS, export_thin, redraw_left_out, seed_tensors
from tests.support.paths import ROOT
from tests.support.temporal import make_settings

FIXTURE = ROOT / "tests" / "fixtures" / "wrappers" / "level1_009_softmax_rows.compile.json"
PROBLEM = ROOT / "problems" / "level1" / "009_softmax_rows.py"
WRAPPER = ROOT / "tests" / "fixtures" / "wrappers" / "level1_009_softmax_rows.py.txt"
FORWARD = SearchTarget(id="forward", kind=TargetKind.FORWARD)


@pytest.fixture
def on_cpu(monkeypatch: pytest.MonkeyPatch) -> None:
    """The activity's CUDA device and set-up, made the CPU's."""
    load, call = runtime.load_tensors, runtime.wrapper_call

    def load_on_cpu(store: ArtifactStore, ref: Any, device: str = "cpu") -> list[Any]:
        return load(store, ref, "cpu")

    def call_on_cpu(compiled: CompileResult, store: ArtifactStore, wrapper: Any = None, *_: Any):
        return call(compiled, store, wrapper, "cpu")

    monkeypatch.setattr(runtime, "prepare_wrapper_process", lambda: None)
    monkeypatch.setattr(runtime, "load_tensors", load_on_cpu)
    monkeypatch.setattr(runtime, "wrapper_call", call_on_cpu)


def make_home(settings: Settings) -> CompileResult:
    """A stopped server's database and the compile's blobs; the reference is the CPU's."""
    recorded = CompileResult.model_validate_json(FIXTURE.read_text())
    (settings.home / "server").mkdir(parents=True)
    with sqlite3.connect(settings.home / DB_NAME) as db:
        db.execute("CREATE TABLE executions (id TEXT)")
    store = open_store(settings.artifacts_dir)
    assert store.put_text(PROBLEM.read_text(), "text/x-python").sha256 == (
        recorded.problem.source.sha256
    )
    assert store.put_text(WRAPPER.read_text(), "text/x-python").sha256 == recorded.wrapper.sha256
    drawn = seed_tensors(recorded, store)
    for field in REDRAWN_FIELDS:
        assert save_tensors(store, drawn[field], field).sha256 == getattr(recorded, field).sha256
    reference = save_tensors(store, [torch.softmax(drawn["inputs"][0], dim=-1)], "reference")
    compiled = recorded.model_copy(update={"reference_output": reference})
    (settings.home / "compile_cache").mkdir()
    (settings.home / "compile_cache" / f"{compiled.cache_key}.json").write_text(
        compiled.model_dump_json()
    )
    return compiled


CANDIDATE = """
import torch


class ModelNew(torch.nn.Module):
    def forward(self, x):
        e = torch.exp(x - x.amax(dim=-1, keepdim=True))
        return e / e.sum(dim=-1, keepdim=True)
"""


def softmax_by_hand(x: torch.Tensor) -> torch.Tensor:
    e = torch.exp(x - x.amax(dim=-1, keepdim=True))
    return e / e.sum(dim=-1, keepdim=True)


def stitch(compiled: CompileResult, store: ArtifactStore, **fields: Any) -> RestitchResult:
    """A single-kernel candidate that rounds unlike the reference, re-stitched and run."""
    candidate = store.put_text(CANDIDATE, "text/x-python", "softmax_forward.py")
    replacement = Replacement(target=FORWARD, source=candidate)
    return restitch(RestitchInput(compiled=compiled, replacements=[replacement], **fields), store)


def _kept_blob_bytes(settings: Settings, left_out: set[str]) -> int:
    blobs = settings.artifacts_dir.glob("??/*")
    return sum(
        p.stat().st_size for p in blobs if f"artifacts/{p.parent.name}/{p.name}" not in left_out
    )


def test_a_restitched_model_output_is_compared_but_never_stored(
    tmp_path: Path, on_cpu: None
) -> None:
    settings = make_settings(tmp_path / "a")
    compiled = make_home(settings)
    result = stitch(compiled, open_store(settings.artifacts_dir))
    assert result.bit_exact is False and 0.0 < result.max_abs_diff < 1e-4  # compared, as before

    archive = tmp_path / "home.tgz"
    thin = export_thin(settings, archive)
    left_out = set(read_manifest(archive).left_out)
    assert left_out == set(thin.plan.paths)
    assert _kept_blob_bytes(settings, left_out) < 1 << 20
    assert archive.stat().st_size < 1 << 20  # the 128 MiB output did not travel
    assert result.output is None

    moved = make_settings(tmp_path / "b")
    import_state(moved, archive)
    assert redraw_left_out(moved).blobs == 2  # args and inputs are one blob, and init inputs
    store = open_store(moved.artifacts_dir)
    again = stitch(compiled, store)  # a resumed campaign re-stitches on the drawn-again args
    assert again.output is None and again.bit_exact is None  # the reference stayed behind
    kept = stitch(compiled, store, keep_output=True)  # asked for (tests, diagnostics)
    assert kept.output is not None
    (out,) = runtime.load_tensors(store, kept.output)
    (x,) = seed_tensors(compiled, store)["inputs"]
    assert torch.equal(out, softmax_by_hand(x))
