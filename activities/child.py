"""Entry point of a supervised child: ``python -m activities.child module:fn in.json out.json``.

Loads the input model named by the function's first annotation, runs the
function with the configured artifact store, and writes ``{"ok": ...}`` JSON.
Exceptions become text here, so nothing unpicklable crosses the boundary.
"""

from __future__ import annotations

import importlib
import inspect
import json
import sys
import traceback
import typing
from pathlib import Path

from kernelopt.errors import DeterministicError
from kernelopt.store import open_store


def main(argv: list[str]) -> int:
    target, in_path, out_path = argv
    out = Path(out_path)
    try:
        module_name, _, func_name = target.partition(":")
        func = getattr(importlib.import_module(module_name), func_name)
        params = list(inspect.signature(func).parameters.values())
        hints = typing.get_type_hints(func)
        input_type = hints[params[0].name]
        inp = input_type.model_validate_json(Path(in_path).read_text())
        result = func(inp, open_store())
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
