"""Progress of ``kernelopt verify`` from the gate children's own progress marks.

Every gate child appends its phases (import, build, dry_run, call per input
set, done) to ``progress.jsonl`` in its work directory; that is the hook the
gates already offer.  A watcher thread reads those files under the verify's
work directory and prints one line per new phase, so a CPU verify that takes
minutes in the Triton interpreter shows where it is instead of nothing.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

from rich.console import Console

from kernelopt.cli.scoped import Scoped

_QUIET_PARTS = {"child", "reference"}


def label_for(root: Path, progress_file: Path) -> str:
    """'reference', 'candidate', 'candidate/timing-1': which child a progress file belongs to."""
    parts = progress_file.parent.relative_to(root).parts
    if not parts:
        return "gate"
    head = parts[0].split("-", 1)[0]
    rest = [p for p in parts[1:] if p not in _QUIET_PARTS]
    return "/".join([head, *rest])


def describe(mark: dict) -> str:
    """One progress mark in words: 'call seed2', 'dry_run seed0', 'import'."""
    phase = str(mark.get("phase", "?"))
    where = mark.get("set")
    return f"{phase} {where}" if where else phase


class ProgressWatcher(Scoped):
    """Prints new progress marks under ``root`` while the cascade runs (a context manager)."""

    def __init__(self, root: Path, console: Console, every_s: float = 0.5) -> None:
        self.root, self.console, self.every_s = Path(root), console, every_s
        self.seen: dict[Path, int] = {}
        self.started = time.monotonic()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="verify-progress", daemon=True)

    def poll(self) -> list[str]:
        """Lines for the marks written since the last poll (also printed)."""
        lines = []
        for path in sorted(self.root.rglob("progress.jsonl")):
            try:
                data = path.read_bytes()
            except OSError:
                continue
            done = self.seen.get(path, 0)
            complete = data.decode("utf-8", errors="replace").split("\n")[:-1]  # whole lines
            for raw in complete[done:]:
                try:
                    mark = json.loads(raw)
                except json.JSONDecodeError:
                    continue
                elapsed = time.monotonic() - self.started
                lines.append(f"[{elapsed:5.0f} s] {label_for(self.root, path)}: {describe(mark)}")
            self.seen[path] = max(done, len(complete))
        for line in lines:
            self.console.print(line, style="dim", highlight=False, soft_wrap=True)
        return lines

    def _run(self) -> None:
        while not self._stop.wait(self.every_s):
            self.poll()

    def begin(self) -> None:
        self._thread.start()

    def end(self, exc: BaseException | None) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        if exc is None:
            self.poll()


__all__ = ["ProgressWatcher", "describe", "label_for"]
