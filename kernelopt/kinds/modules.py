"""Import generated source text as a real module (Triton and Helion read functions from files).

``@triton.jit`` and ``@helion.kernel`` both inspect their function's source, so
text we generate (a baseline with its launch configuration, a built-in
variant) is written to ``$KERNELOPT_HOME/code/kinds/<sha>.py`` before import;
the same text is imported once per process.
"""

from __future__ import annotations

import hashlib
import tempfile
from pathlib import Path
from types import ModuleType

from kernelopt.errors import ProblemError
from kernelopt.pyfile import exec_file

_LOADED: dict[str, ModuleType] = {}


def code_dir() -> Path:
    from kernelopt.config import Settings

    directory = Settings.from_env().home / "code" / "kinds"
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError:
        directory = Path(tempfile.gettempdir()) / "kernelopt-code" / "kinds"
        directory.mkdir(parents=True, exist_ok=True)
    return directory


def import_path(path: Path, module_name: str, label: str) -> ModuleType:
    """Import ``path`` as ``module_name``; any failure is a ``ProblemError`` naming ``label``."""
    if module_name in _LOADED:
        return _LOADED[module_name]
    try:
        module = exec_file(path, module_name)
    except Exception as exc:
        raise ProblemError(label, f"importing failed: {type(exc).__name__}: {exc}") from exc
    _LOADED[module_name] = module
    return module


def import_source(source: str, prefix: str, label: str) -> ModuleType:
    """Write ``source`` under its content hash and import it (once per process)."""
    digest = hashlib.sha256(source.encode("utf-8")).hexdigest()[:20]
    safe = "".join(c if c.isalnum() else "_" for c in prefix) or "module"
    module_name = f"kernelopt_kinds_{safe}_{digest}"
    path = code_dir() / f"{module_name}.py"
    if not path.is_file() or path.read_text(encoding="utf-8") != source:
        tmp = path.with_suffix(".tmp")
        tmp.write_text(source, encoding="utf-8")
        tmp.replace(path)
    return import_path(path, module_name, label)
