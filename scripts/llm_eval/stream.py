"""What a call writes to $OUT as it happens: a call cut at its time limit still says what it did."""

from __future__ import annotations

import json
import os
import shutil
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from kernelopt.store import write_atomic


def now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class Stream:
    """``progress.jsonl`` (append, flushed per event) and ``progress.md`` (rewritten whole)."""

    def __init__(self, out: Path) -> None:
        self.out = out
        out.mkdir(parents=True, exist_ok=True)
        self.started = time.monotonic()
        self._events = (out / "progress.jsonl").open("a", encoding="utf-8")
        self._table = ""
        self.failed = False

    @property
    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def event(self, kind: str, **fields: Any) -> None:
        self.failed = self.failed or kind == "failed"
        record = {"t": round(self.elapsed, 1), "at": now(), "event": kind, **fields}
        self._events.write(json.dumps(record, default=str) + "\n")
        self._events.flush()
        os.fsync(self._events.fileno())
        detail = " ".join(f"{k}={v}" for k, v in fields.items() if not isinstance(v, list | dict))
        print(f"[{self.elapsed:6.1f}s] {kind} {detail}".rstrip(), flush=True)

    def table(self, text: str) -> None:
        if text != self._table:
            self._table = text
            write_atomic(self.out / "progress.md", text.encode("utf-8"))

    def put(self, name: str, source: Path) -> Path:
        """Copy a finished file into $OUT under ``name`` (replaced whole, never half-written)."""
        target = self.out / name
        partial = self.out / f".{name}.part"
        shutil.copyfile(source, partial)
        os.replace(partial, target)
        return target

    def close(self) -> None:
        self._events.close()
