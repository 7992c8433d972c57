"""Entry point of a gate child process: ``python -m gates.child WORKDIR``.

Reads ``WORKDIR/job.json``, runs the job, writes ``WORKDIR/result.json``.
Progress markers go to ``WORKDIR/progress.jsonl`` (``gates.job_progress``) so
that when the process dies hard -- a segfault, an illegal memory access that
kills the context, a SIGKILL on timeout -- the parent still knows which phase
it died in.  Exceptions become text here; nothing else crosses.
"""

from __future__ import annotations

import json
import os
import sys
import traceback
from pathlib import Path

from gates.job_progress import current_phase, mark, record_to
from gates.sandbox import apply_limits, not_inspectable
from kernelopt.errors import DeterministicError
from kernelopt.pidfile import die_with_parent


def main(argv: list[str]) -> int:
    die_with_parent()
    not_inspectable()
    workdir = Path(argv[0])
    apply_limits(workdir)  # before any job (or candidate) code: soft = hard, for good
    record_to(workdir)
    out = workdir / "result.json"
    try:
        raw = json.loads((workdir / "job.json").read_text())
        kind = raw.get("job")
        mark("load_job", job=kind)
        # imported on demand: a spawned child loads only the job it runs
        if kind == "reference":
            from gates.jobs import reference as job_module
        elif kind == "candidate":
            from gates.jobs import candidate as job_module
        elif kind == "timing" and raw.get("turns"):
            from gates.jobs import turn_side as job_module
        elif kind == "timing":
            from gates.jobs import timing as job_module
        elif kind == "screen":
            from gates.jobs import screen as job_module
        else:
            raise ValueError(f"unknown job kind {kind!r}")
        result = job_module.run(job_module.JOB_TYPE.model_validate(raw))
        payload = {"ok": True, "phase": current_phase(), "result": result.model_dump(mode="json")}
    except BaseException as exc:
        payload = {
            "ok": False,
            "phase": current_phase(),
            "error_type": type(exc).__name__,
            # raised on purpose with a message that says it all (a broken problem file, a
            # reference that is not reproducible): the user needs no traceback
            "explained": isinstance(exc, DeterministicError),
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
    main(sys.argv[1:])
