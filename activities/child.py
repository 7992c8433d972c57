"""Entry point of a supervised child: ``python -m activities.child module:fn in.json out.json``.

Loads the input model named by the function's first annotation, runs the
function with the configured artifact store, and writes ``{"ok": ...}`` JSON.
Exceptions become text here, so nothing unpicklable crosses the boundary.
"""

from __future__ import annotations

import time

_STARTED = time.time()

import importlib  # noqa: E402
import inspect  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import sys  # noqa: E402
import traceback  # noqa: E402
import typing  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

from kernelopt.checkpoint import SPAWNED_AT_ENV  # noqa: E402
from kernelopt.errors import DeterministicError  # noqa: E402
from kernelopt.store import open_store  # noqa: E402


def _startup_stages(result: Any, imported_at: float) -> Any:
    """Add this process's own start-up to a result that reports stages (``stage_seconds``).

    ``process_start``: from the supervisor's spawn to this module running
    (interpreter, site, our imports); ``import_target``: importing the
    activity's module.  Without them a gate run's stages miss its biggest fixed cost.
    """
    stages = getattr(result, "stage_seconds", None)
    spawned = os.environ.get(SPAWNED_AT_ENV)
    if not isinstance(stages, dict) or not spawned:
        return result
    extra = {
        "process_start": round(_STARTED - float(spawned), 3),
        "import_target": round(imported_at - _STARTED, 3),
    }
    return result.model_copy(update={"stage_seconds": {**extra, **stages}})


def main(argv: list[str]) -> int:
    target, in_path, out_path = argv
    out = Path(out_path)
    try:
        module_name, _, func_name = target.partition(":")
        func = getattr(importlib.import_module(module_name), func_name)
        imported_at = time.time()
        params = list(inspect.signature(func).parameters.values())
        hints = typing.get_type_hints(func)
        input_type = hints[params[0].name]
        inp = input_type.model_validate_json(Path(in_path).read_text())
        result = _startup_stages(func(inp, open_store()), imported_at)
        out.write_text(json.dumps({"ok": True, "result": result.model_dump(mode="json")}))
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


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
