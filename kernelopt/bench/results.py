"""Per-problem results on disk: one ``Outcome`` JSON per finished problem.

The layout mirrors the suite (``RESULTS/level1/001_relu_chain.json``, or
``RESULTS/name.json`` for a flat suite), so a results directory is
self-describing: the level of each outcome is read back from its folder, and
a problem whose file exists is finished -- which is what makes a bench run
resumable.  Files are written atomically (temp file + rename) so a crash
mid-write never leaves a half-written "finished" problem behind.
"""

from __future__ import annotations

import os
import re
import tempfile
from pathlib import Path

from pydantic import ValidationError

from kernelopt.contracts import Outcome
from kernelopt.contracts.base import Frozen
from kernelopt.log import get_logger

from .suite import SuiteEntry

log = get_logger(__name__)

_LEVEL_DIR = re.compile(r"^level(\d+)$")
SUMMARY_SUFFIX = ".summary.json"  # what ``report.write_report`` writes next to the outcomes


class ProblemResult(Frozen):
    """One finished problem: where it sits in the suite and how it ended."""

    level: int | None
    name: str
    outcome: Outcome


def result_path(results_dir: str | Path, entry: SuiteEntry) -> Path:
    return Path(results_dir) / f"{entry.key}.json"


def save_outcome(results_dir: str | Path, entry: SuiteEntry, outcome: Outcome) -> Path:
    """Write ``outcome`` atomically where ``read_outcome`` / ``load_results`` find it."""
    path = result_path(results_dir, entry)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.stem}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(outcome.model_dump_json(indent=2))
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def read_outcome(path: Path) -> Outcome | None:
    """The outcome stored at ``path``; None when missing or unreadable (then: re-run it)."""
    if not path.is_file():
        return None
    try:
        return Outcome.model_validate_json(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, ValidationError) as exc:
        log.warning("bench.unreadable_result", path=str(path), error=str(exc)[:200])
        return None


def load_results(results_dir: str | Path) -> list[ProblemResult]:
    """Every readable outcome under ``results_dir``, levels taken from the folder names."""
    root = Path(results_dir)
    results: list[ProblemResult] = []
    for path in sorted(root.rglob("*.json")):
        if path.name.startswith(".") or path.name.endswith(SUMMARY_SUFFIX):
            continue  # hidden temp files, and the report's own summary beside the outcomes
        rel = path.relative_to(root)
        level: int | None = None
        if len(rel.parts) == 2 and (m := _LEVEL_DIR.match(rel.parts[0])):
            level = int(m.group(1))
        elif len(rel.parts) != 1:
            continue
        outcome = read_outcome(path)
        if outcome is not None:
            results.append(ProblemResult(level=level, name=path.stem, outcome=outcome))
    return results


RUNS_FILE = "runs.jsonl"


class BenchRun(Frozen):
    """One ``kernelopt bench`` invocation on a results directory: what it was asked to do.

    Kept line by line in ``runs.jsonl`` beside the outcomes, so a report built
    from results gathered over several sessions states every search setting
    that produced them (and flags a mix).
    """

    started_at: str
    suite_problems: int
    search: str


def record_run(results_dir: str | Path, run: BenchRun) -> None:
    path = Path(results_dir) / RUNS_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as fh:
        fh.write(run.model_dump_json() + "\n")


def load_runs(results_dir: str | Path) -> list[BenchRun]:
    path = Path(results_dir) / RUNS_FILE
    if not path.is_file():
        return []
    runs = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            runs.append(BenchRun.model_validate_json(line))
        except ValidationError as exc:
            log.warning("bench.unreadable_run", path=str(path), error=str(exc)[:200])
    return runs


ERRORS_DIR = "errors"  # RESULTS/errors/<key>.txt: a problem whose last attempt failed


def error_path(results_dir: str | Path, key: str) -> Path:
    return Path(results_dir) / ERRORS_DIR / f"{key}.txt"


def record_error(results_dir: str | Path, key: str, error: str) -> None:
    """Keep why a problem failed, so the report can name it (a later success clears it)."""
    path = error_path(results_dir, key)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(error, encoding="utf-8")


def clear_error(results_dir: str | Path, key: str) -> None:
    error_path(results_dir, key).unlink(missing_ok=True)


def load_errors(results_dir: str | Path) -> dict[str, str]:
    """key -> error text of every problem whose last attempt failed."""
    root = Path(results_dir) / ERRORS_DIR
    if not root.is_dir():
        return {}
    return {
        path.relative_to(root).with_suffix("").as_posix(): path.read_text(encoding="utf-8")
        for path in sorted(root.rglob("*.txt"))
    }
