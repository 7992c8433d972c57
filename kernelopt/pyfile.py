"""Import a Python file (problem, candidate, wrapper) as a named module.

Every loader of user or generated code goes through here: the problem kinds
(``kernelopt.kinds``), the compile step's wrappers and candidates
(``kernelopt.compile.runtime``) and the gates' candidate files.  They differ
only in the error they raise, so the loading itself lives here once.
Generated text is written to a file first because ``@triton.jit``,
``@helion.kernel`` and Dynamo all read their function's source from a file.
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib.util
import io
import re
import sys
import tempfile
import tokenize
from pathlib import Path
from types import ModuleType

_IMPORTED: dict[str, ModuleType] = {}
# PEP 263's encoding declaration, on one of a file's first two lines
_DECLARATION = re.compile(r"^([ \t\f]*#.*?coding[:=][ \t]*)([-\w.]+)")


class NoImportSpec(ImportError):
    """The path cannot be imported as a Python module at all (no spec, no loader)."""


def exec_file(path: Path, module_name: str) -> ModuleType:
    """Import ``path`` as ``module_name`` (registered in ``sys.modules``).

    On failure the half-initialised module is removed again and the original
    exception propagates; ``NoImportSpec`` if no import spec can be made.
    """
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise NoImportSpec(f"cannot create an import spec for {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(module_name, None)
        raise
    _register_output_dataclasses(module)
    return module


def _register_output_dataclasses(module: ModuleType) -> None:
    """Make the file's own dataclasses pytree nodes, as ``transformers`` does for its
    ``ModelOutput``: a forward may return one, and every comparison, record and compiled
    wrapper walks outputs with ``torch.utils._pytree``, which sees an unregistered
    dataclass as one opaque leaf.  A class with fields ``__init__`` does not take stays a
    leaf (pytree rebuilds a node through its ``__init__``)."""
    if "torch" not in sys.modules:  # a file that never imported torch returns no tensors
        return
    from torch.utils import _pytree

    for value in list(vars(module).values()):
        if (
            isinstance(value, type)
            and dataclasses.is_dataclass(value)
            and value.__module__ == module.__name__
            and value not in _pytree.SUPPORTED_NODES
            and all(f.init for f in dataclasses.fields(value))
        ):
            _pytree.register_dataclass(value)


def exec_file_once(path: Path, module_name: str) -> ModuleType:
    """``exec_file`` memoised by module name: the same text is imported once per process."""
    if module_name not in _IMPORTED:
        _IMPORTED[module_name] = exec_file(path, module_name)
    return _IMPORTED[module_name]


def read_source(path: Path) -> str:
    """A Python file's text as Python itself reads it: a UTF-8 byte-order mark, or an
    encoding declaration (``# -*- coding: latin-1 -*-``), honoured.

    The text is stored and written again as UTF-8, so a declaration of another encoding
    is changed to say so.  ``SyntaxError`` (a bad declaration) or ``UnicodeDecodeError``.
    """
    data = path.read_bytes()
    encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    text = data.decode(encoding)  # utf-8-sig drops the byte-order mark
    if encoding in ("utf-8", "utf-8-sig"):
        return text
    lines = text.split("\n")
    for i in range(min(2, len(lines))):
        lines[i] = _DECLARATION.sub(r"\g<1>utf-8", lines[i], count=1)
    return "\n".join(lines)


def code_dir(*parts: str) -> Path:
    """``$KERNELOPT_HOME/<parts>``, created; the temp directory when the home is read-only."""
    from kernelopt.config import Settings

    directory = Settings.from_env().home.joinpath(*parts)
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError:
        directory = Path(tempfile.gettempdir()).joinpath("kernelopt-code", *parts)
        directory.mkdir(parents=True, exist_ok=True)
    return directory


def source_digest(source: str, length: int) -> str:
    """The first ``length`` hex digits of the text's sha256 (module and file names)."""
    return hashlib.sha256(source.encode("utf-8")).hexdigest()[:length]


def safe_name(text: str, fallback: str = "module") -> str:
    """``text`` with every character a module name cannot hold replaced by ``_``."""
    return "".join(c if c.isalnum() or c == "_" else "_" for c in text) or fallback


def write_source(path: Path, source: str) -> Path:
    """Write ``source`` to ``path`` unless it already holds it (atomically: readers race)."""
    if not path.is_file() or path.read_text(encoding="utf-8") != source:
        tmp = path.with_suffix(f".{source_digest(source, 8)}.tmp")
        tmp.write_text(source, encoding="utf-8")
        tmp.replace(path)
    return path


def import_source(source: str, module_name: str, directory: Path) -> ModuleType:
    """Write ``source`` to ``directory/<module_name>.py`` and import it (once per process)."""
    if module_name in _IMPORTED:
        return _IMPORTED[module_name]
    return exec_file_once(write_source(directory / f"{module_name}.py", source), module_name)
