"""Entry point of a supervised child: ``python -m activities.child``, its job on stdin.

The job is one JSON line (target ``module:fn``, input and output paths, the
job's own environment); a spare child (``activities.spare_child``) imports
``$KERNELOPT_CHILD_PRELOAD`` before reading it.

Loads the input model named by the function's first annotation, runs the
function with the configured artifact store, and writes ``{"ok": ...}`` JSON.
Exceptions become text here, so nothing unpicklable crosses the boundary.
"""

from __future__ import annotations

import importlib
import inspect
import json
import os
import sys
import time
import traceback
import typing
from pathlib import Path
from typing import Any

from gates.gpu_lease import LEASE_ENV, waited_s, whole_job
from kernelopt.checkpoint import SPAWNED_AT_ENV
from kernelopt.errors import DeterministicError
from kernelopt.stages import add_stages
from kernelopt.store import open_store


def _startup_stages(result: Any, started: float, imported: float) -> Any:
    """Add this process's own start-up to a result that reports stages (``stage_seconds``).

    ``process_start``: from the supervisor's spawn to ``main`` running
    (interpreter, site, this module's light imports); ``import_target``:
    importing the activity's module (torch, for the gates).  Without them a
    gate run's stages would miss a fixed cost of seconds.
    """
    spawned = os.environ.get(SPAWNED_AT_ENV)
    if not spawned:
        return result
    extra = {
        "process_start": round(started - float(spawned), 3),
        "import_target": round(imported - started, 3),
    }
    return add_stages(result, extra, first=True)


def main(argv: list[str]) -> int:
    started = time.time()
    target, in_path, out_path = argv
    out = Path(out_path)
    try:
        module_name, _, func_name = target.partition(":")
        func = getattr(importlib.import_module(module_name), func_name)
        imported = time.time()
        params = list(inspect.signature(func).parameters.values())
        hints = typing.get_type_hints(func)
        input_type = hints[params[0].name]
        inp = input_type.model_validate_json(Path(in_path).read_text())
        with whole_job(os.environ.get(LEASE_ENV)):  # a timed job waits for the GPU to itself
            result = _startup_stages(func(inp, open_store()), started, imported)
        payload = {"ok": True, "result": result.model_dump(mode="json"), "lease_wait_s": waited_s()}
        out.write_text(json.dumps(payload))
        return 0
    except BaseException as exc:
        out.write_text(
            json.dumps(
                {
                    "ok": False,
                    "error_type": type(exc).__name__,
                    "message": str(exc),
                    "traceback": traceback.format_exc(limit=20),
                    "deterministic": isinstance(exc, DeterministicError),
                }
            )
        )
        return 1


def serve() -> int:
    """Import what the supervisor named ahead, then run the job it hands over."""
    import contextlib

    from activities.spare_child import PRELOAD_ENV

    for name in filter(None, os.environ.get(PRELOAD_ENV, "").split(",")):
        with contextlib.suppress(Exception):  # the job's own import reports any failure
            importlib.import_module(name)
    line = sys.stdin.readline()
    if not line:
        return 0  # the worker went away before it had a job for us
    job = json.loads(line)
    os.environ.update(job["env"])
    return main([job["target"], job["in"], job["out"]])


if __name__ == "__main__":
    code = serve()
    sys.stdout.flush()
    sys.stderr.flush()
    # The result is on disk: skip interpreter teardown.  Inductor's compile-worker
    # pool, the profiler and the CUDA context take seconds to shut down (on the H200,
    # triage's run was ~10 s longer than all its stages), and the supervisor kills
    # whatever this process group left behind.
    os._exit(code)
