"""Entry point of a gate child process: ``python -m gates.child WORKDIR``.

Reads ``WORKDIR/job.json``, runs the job, writes ``WORKDIR/result.json``.
Progress markers go to ``WORKDIR/progress.jsonl`` (flushed and fsynced line by
line) so that when the process dies hard -- a segfault, an illegal memory
access that kills the context, a SIGKILL on timeout -- the parent still knows
which phase it died in.  Exceptions become text here; nothing else crosses.
"""

from __future__ import annotations

import json
import os
import sys
import time
import traceback
from pathlib import Path

from gates.sandbox import apply_limits
from kernelopt.pidfile import die_with_parent

_progress_path: Path | None = None
_phase = "start"


def mark(phase: str, **detail: object) -> None:
    """Record that the child entered ``phase`` (durable before the phase runs)."""
    global _phase
    _phase = phase
    if _progress_path is None:
        return
    line = json.dumps({"phase": phase, "t": time.time(), **detail}, default=str)
    with open(_progress_path, "a", encoding="utf-8") as handle:
        handle.write(line + "\n")
        handle.flush()
        os.fsync(handle.fileno())


def job_file(name: str) -> Path:
    """A file in this child's own workdir (staged into a sandboxed zygote's view, and back)."""
    if _progress_path is None:
        return Path(name)
    return _progress_path.parent / name


def current_phase() -> str:
    return _phase


def main(argv: list[str]) -> int:
    global _progress_path
    die_with_parent()
    workdir = Path(argv[0])
    apply_limits(workdir)  # before any job (or candidate) code: soft = hard, for good
    _progress_path = workdir / "progress.jsonl"
    out = workdir / "result.json"
    try:
        raw = json.loads((workdir / "job.json").read_text())
        kind = raw.get("job")
        mark("load_job", job=kind)
        if kind == "reference":
            from gates.jobs import reference as job_module
        elif kind == "candidate":
            from gates.jobs import candidate as job_module
        elif kind == "timing":
            from gates.jobs import timing as job_module
        else:
            raise ValueError(f"unknown job kind {kind!r}")
        result = job_module.run(job_module.JOB_TYPE.model_validate(raw))
        payload = {"ok": True, "phase": _phase, "result": result.model_dump(mode="json")}
    except BaseException as exc:
        payload = {
            "ok": False,
            "phase": _phase,
            "error_type": type(exc).__name__,
            "message": str(exc)[:4000],
            "traceback": traceback.format_exc(limit=30)[-12000:],
        }
    out.write_text(json.dumps(payload, default=str))
    sys.stdout.flush()
    sys.stderr.flush()
    # Skip interpreter teardown: a candidate's atexit hooks or a wedged CUDA
    # context must not turn a written result into a hang or a crash.
    os._exit(0 if payload["ok"] else 1)


if __name__ == "__main__":
    # Run the *imported* module's main: under ``-m`` this file is ``__main__``, and
    # the jobs' ``from gates.child import mark`` must see the same progress state.
    from gates.child import main as _main

    _main(sys.argv[1:])
