"""Discover a benchmark suite laid out like KernelBench.

Two layouts are accepted:

* ``SUITE/level1/*.py``, ``SUITE/level2/*.py``, ... -- each file is one problem of
  that level (KernelBench's own layout, and ours under ``problems/``);
* a flat ``SUITE/*.py`` -- problems without a level.

Files are checked with the cheap AST validation (no import, no torch), so a
broken file fails the discovery before any campaign starts instead of hours
into a run.  Order is stable: by level, then by the file's leading number
(``2_x.py`` before ``10_x.py``), then by name.
"""

from __future__ import annotations

import re
from pathlib import Path

from kernelopt.contracts.base import Frozen
from kernelopt.errors import ProblemError
from kernelopt.log import get_logger
from kernelopt.problem import check_problem_source, read_problem_file

log = get_logger(__name__)

_LEVEL_DIR = re.compile(r"^level(\d+)$")
_LEADING_NUMBER = re.compile(r"^(\d+)")


class SuiteEntry(Frozen):
    """One problem file of a suite."""

    level: int | None
    name: str  # the file stem, e.g. "001_relu_chain"
    path: Path

    @property
    def key(self) -> str:
        """Unique within a suite; also the result file's path below the results dir."""
        return self.name if self.level is None else f"level{self.level}/{self.name}"


def check_problem_shape(path: Path) -> None:
    """AST-only check that ``path`` is a KernelBench problem (no import, no torch): the
    check the problem loader starts with, so a suite takes the files ``optimize`` takes
    and keeps helper modules and broken files out early."""
    check_problem_source(read_problem_file(path), str(path))


def _is_candidate(path: Path) -> bool:
    return path.is_file() and path.suffix == ".py" and not path.name.startswith(("_", "."))


def _sort_key(entry: SuiteEntry) -> tuple[int, int, str]:
    match = _LEADING_NUMBER.match(entry.name)
    number = int(match.group(1)) if match else 1 << 30
    return (entry.level if entry.level is not None else -1, number, entry.name)


def _entries(folder: Path, level: int | None, strict: bool) -> list[SuiteEntry]:
    found = []
    for path in sorted(p for p in folder.iterdir() if _is_candidate(p)):
        try:
            check_problem_shape(path)
        except ProblemError as exc:
            if strict:
                raise
            log.warning("suite.skip_file", path=str(path), reason=exc.reason)
            continue
        found.append(SuiteEntry(level=level, name=path.stem, path=path.resolve()))
    return found


def discover_suite(
    suite_dir: str | Path, levels: set[int] | None = None, strict: bool = True
) -> list[SuiteEntry]:
    """Every problem of ``suite_dir``; ``levels`` restricts to some levels.

    With ``strict`` (default) a file that is not a valid problem raises
    ``ProblemError``; otherwise it is skipped with a warning (useful for
    suites that keep helper modules next to their problems).
    """
    root = Path(suite_dir)
    if not root.is_dir():
        raise ProblemError(str(root), "suite directory does not exist")
    level_dirs = {
        int(m.group(1)): p
        for p in root.iterdir()
        if p.is_dir() and (m := _LEVEL_DIR.match(p.name)) is not None
    }
    entries: list[SuiteEntry] = []
    if level_dirs:
        for level in sorted(level_dirs):
            if levels is None or level in levels:
                entries += _entries(level_dirs[level], level, strict)
    elif levels is None:
        entries = _entries(root, None, strict)
    if not entries:
        raise ProblemError(str(root), "no problem files found (expected level*/ folders or *.py)")
    log.info("suite.discovered", suite=str(root), problems=len(entries))
    return sorted(entries, key=_sort_key)
