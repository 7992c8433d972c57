"""Each GPU worker gets Triton and Inductor caches of its own.

The cache guard (``gates/cache_guard.py``) fails a candidate for any cached
file whose content changed while the candidate's process ran.  That verdict is
only right if nothing else writes those caches meanwhile; with shared
default caches, other workers' compiles (Inductor's benchmark-cache file, a
kernel's ``.best_config``) failed honest candidates (docs/TEAM_NOTES.md,
"Measurements behind the code").  A GPU worker runs one activity at a time and its gate
processes one after another, so with caches of its own the only process that
can write them during a candidate's window is that candidate.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

CACHE_ENV = ("TRITON_CACHE_DIR", "TORCHINDUCTOR_CACHE_DIR")


def worker_cache_dirs(root: Path, host: str, gpu: str) -> tuple[Path, Path]:
    """(Triton, Inductor) cache directories of the GPU worker for ``gpu`` on ``host``.

    ``gpu`` is the physical device (an index or a ``GPU-<uuid>`` from
    ``CUDA_VISIBLE_DEVICES``), so two workers on one host never share, and the
    host is in the name in case ``root`` is on a shared file system.
    """
    name = re.sub(r"[^A-Za-z0-9._-]", "_", f"{host}-gpu{gpu}")
    base = root / name
    return base / "triton", base / "inductor"


def isolate_compiler_caches(root: Path, host: str, gpu: str) -> tuple[Path, Path]:
    """Point this process -- and every process it starts -- at the worker's own caches.

    Set before the worker starts its zygote or any activity: both compilers
    read these variables when they compile, and children inherit them.
    """
    dirs = worker_cache_dirs(root, host, gpu)
    for env, path in zip(CACHE_ENV, dirs, strict=True):
        path.mkdir(parents=True, exist_ok=True)
        os.environ[env] = str(path)
    return dirs
