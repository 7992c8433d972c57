"""Import generated source text as a real module (Triton and Helion read functions from files).

``@triton.jit`` and ``@helion.kernel`` both inspect their function's source, so
text we generate (a baseline with its launch configuration, a built-in
variant) is written to ``$KERNELOPT_HOME/code/kinds/<sha>.py`` before import
(``kernelopt.pyfile``); the same text is imported once per process.
"""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

from kernelopt.errors import ProblemError
from kernelopt.pyfile import code_dir, exec_file_once, safe_name, source_digest, write_source


def kinds_dir() -> Path:
    """Where generated kernel-problem modules are written."""
    return code_dir("code", "kinds")


def import_path(path: Path, module_name: str, label: str) -> ModuleType:
    """Import ``path`` as ``module_name``; any failure is a ``ProblemError`` naming ``label``."""
    try:
        return exec_file_once(path, module_name)
    except Exception as exc:
        raise ProblemError(label, f"importing failed: {type(exc).__name__}: {exc}") from exc


def import_source(source: str, prefix: str, label: str) -> ModuleType:
    """Write ``source`` under its content hash and import it (once per process)."""
    module_name = f"kernelopt_kinds_{safe_name(prefix)}_{source_digest(source, 20)}"
    path = write_source(kinds_dir() / f"{module_name}.py", source)
    return import_path(path, module_name, label)
