"""A fingerprint of the code a long-lived process was started from.

Local workers outlive the command that started them.  After ``git pull`` (or a
package upgrade) a worker still running the old code would execute new
workflow code against old contracts -- every task then fails.  Comparing the
fingerprint a worker was started with to the current one lets
``ensure_local_workers`` restart exactly the stale ones.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

_ROOT = Path(__file__).resolve().parent.parent
_PACKAGES = ("kernelopt", "workflows", "activities", "gates")


def code_fingerprint() -> str:
    """sha256 over the names and contents of every source file a worker runs."""
    digest = hashlib.sha256()
    files = [p for pkg in _PACKAGES for p in (_ROOT / pkg).rglob("*.py")]
    files.append(_ROOT / "worker.py")
    for path in sorted(f for f in files if f.is_file()):
        digest.update(str(path.relative_to(_ROOT)).encode())
        digest.update(b"\0")
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]
