"""``kernelopt state export --thin`` / ``state import``: seed-drawn tensors stay behind.

The home holds the H200 capture of the transformer block (its compile result, the
problem source and the tensors drawn from its seed); the export leaves those
tensors out, the import draws them again to the recorded digests, and a machine
that draws other tensors is told so instead of resuming without them.
"""

from __future__ import annotations

import io
import sqlite3
from pathlib import Path

import pytest
from rich.console import Console

import kernelopt.thin_home
from kernelopt.cli import output
from kernelopt.cli.app import main
from kernelopt.compile.runtime import save_tensors
from kernelopt.contracts.compiled import CompileResult
from kernelopt.state_transfer import DB_NAME, read_manifest
from kernelopt.store import open_store
from kernelopt.thin_home import REDRAWN_FIELDS, seed_tensors
from tests.support.paths import ROOT

FIXTURE = ROOT / "tests" / "fixtures" / "wrappers" / "level3_002_transformer_block.compile.json"
PROBLEM = ROOT / "problems" / "level3" / "002_transformer_block.py"


def run_cli(monkeypatch: pytest.MonkeyPatch, home: Path, *args: str) -> tuple[int, str]:
    """``main`` in this process on ``home``: its exit code and both consoles' text."""
    text = io.StringIO()
    monkeypatch.setattr(output, "console", Console(file=text, width=300))
    monkeypatch.setattr(output, "err_console", Console(file=text, width=300))
    monkeypatch.setenv("KERNELOPT_HOME", str(home))
    monkeypatch.delenv("KERNELOPT_TEMPORAL_ADDRESS", raising=False)
    return main(list(args)), " ".join(text.getvalue().split())


@pytest.fixture(scope="module")
def recorded() -> CompileResult:
    return CompileResult.model_validate_json(FIXTURE.read_text())


def make_home(home: Path, recorded: CompileResult) -> None:
    """A stopped server's database, and the compile as the H200 wrote it into the store."""
    (home / "server").mkdir(parents=True)
    with sqlite3.connect(home / DB_NAME) as db:
        db.execute("CREATE TABLE executions (id TEXT)")
    store = open_store(home / "artifacts")
    assert store.put_text(PROBLEM.read_text(), "text/x-python").sha256 == (
        recorded.problem.source.sha256
    )
    drawn = seed_tensors(recorded, store)
    for field in REDRAWN_FIELDS:
        assert save_tensors(store, drawn[field], field).sha256 == getattr(recorded, field).sha256
    (home / "compile_cache").mkdir()
    (home / "compile_cache" / f"{recorded.cache_key}.json").write_text(FIXTURE.read_text())


def _blob(recorded: CompileResult, field: str) -> str:
    sha256 = getattr(recorded, field).sha256
    return f"artifacts/{sha256[:2]}/{sha256}"


def test_a_thin_archive_leaves_seed_tensors_out_and_the_import_draws_them_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, recorded: CompileResult
) -> None:
    make_home(tmp_path / "a", recorded)
    archive = tmp_path / "thin.tgz"
    code, text = run_cli(monkeypatch, tmp_path / "a", "state", "export", "--thin", str(archive))
    assert code == 0, text
    assert "3 blob(s) left out" in text
    manifest = read_manifest(archive)
    assert sorted(manifest.left_out) == sorted(_blob(recorded, f) for f in REDRAWN_FIELDS)
    tensors = sum(getattr(recorded, f).size for f in REDRAWN_FIELDS)
    assert tensors > 15 << 20 and archive.stat().st_size < 1 << 20

    code, text = run_cli(monkeypatch, tmp_path / "b", "state", "import", str(archive))
    assert code == 0, text
    assert "3 tensor blob(s) drawn again" in text
    moved = open_store(tmp_path / "b" / "artifacts")
    for field in REDRAWN_FIELDS:
        assert moved.get_bytes(getattr(recorded, field))  # present, and its digest checked


def test_tensors_drawn_to_another_digest_are_a_clear_error_and_never_stored(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, recorded: CompileResult
) -> None:
    make_home(tmp_path / "a", recorded)
    archive = tmp_path / "thin.tgz"
    assert run_cli(monkeypatch, tmp_path / "a", "state", "export", "--thin", str(archive))[0] == 0
    honest = seed_tensors

    def another_machine(compiled: CompileResult, store: object) -> dict[str, list]:
        values = honest(compiled, store)  # type: ignore[arg-type]
        values["inputs"] = [x + 1 for x in values["inputs"]]
        return values

    monkeypatch.setattr(kernelopt.thin_home, "seed_tensors", another_machine)
    code, text = run_cli(monkeypatch, tmp_path / "b", "state", "import", str(archive))
    assert code == 2
    assert "level3_002_transformer_block inputs: drawn" in text
    assert f"recorded {recorded.inputs.sha256[:12]}" in text and "without --thin" in text
    moved = open_store(tmp_path / "b" / "artifacts")
    assert not moved.exists(recorded.inputs)
    assert moved.exists(recorded.args) and moved.exists(recorded.init_inputs)


def test_tensors_this_machine_cannot_draw_again_travel_in_the_archive(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, recorded: CompileResult
) -> None:
    make_home(tmp_path / "a", recorded)

    def unlike(compiled: CompileResult, store: object) -> dict[str, list]:
        raise RuntimeError("the problem's code failed here")

    monkeypatch.setattr(kernelopt.thin_home, "seed_tensors", unlike)
    archive = tmp_path / "thin.tgz"
    code, text = run_cli(monkeypatch, tmp_path / "a", "state", "export", "--thin", str(archive))
    assert code == 0, text
    manifest = read_manifest(archive)
    assert manifest.left_out == []
    assert {_blob(recorded, f) for f in REDRAWN_FIELDS} <= {f.path for f in manifest.files}


def test_a_problem_that_fails_to_run_at_import_is_named_not_blamed_on_the_tensors(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, recorded: CompileResult
) -> None:
    """On the H200 an invalid ``TORCH_LOGS`` broke the problem's import, and the message
    said the machine draws other tensors: the cure it named (a full export) was wrong."""
    make_home(tmp_path / "a", recorded)
    archive = tmp_path / "thin.tgz"
    assert run_cli(monkeypatch, tmp_path / "a", "state", "export", "--thin", str(archive))[0] == 0

    def broken_environment(compiled: CompileResult, store: object) -> dict[str, list]:
        raise ValueError("Unknown TORCH_LOGS setting")

    monkeypatch.setattr(kernelopt.thin_home, "seed_tensors", broken_environment)
    code, text = run_cli(monkeypatch, tmp_path / "b", "state", "import", str(archive))
    assert code == 2
    assert "could not be drawn again" in text and "Unknown TORCH_LOGS setting" in text
    assert "other tensors" not in text and "without --thin" not in text
