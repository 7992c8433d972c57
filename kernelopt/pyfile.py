"""Import a Python file (problem, candidate, wrapper) as a named module.

Three callers load user or generated code from a path; they differ only in
the error they raise, so the loading itself lives here once.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType


def exec_file(path: Path, module_name: str) -> ModuleType:
    """Import ``path`` as ``module_name`` (registered in ``sys.modules``).

    On failure the half-initialised module is removed again and the original
    exception propagates; ``ImportError`` if no import spec can be made.
    """
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot create an import spec for {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(module_name, None)
        raise
    return module
