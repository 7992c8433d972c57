"""Cheat -- an honest kernel that also rewrites the compiled kernels in Triton's cache.

Every later process (the baseline's timing runs) loads its kernels from that
cache: a slow binary planted there would make the baseline slow and this
candidate look fast.  This one appends a zero byte to each cached binary in
place (inode and name unchanged; the ELF loader ignores trailing bytes).
"""

import os
from pathlib import Path


def _rewrite_cache() -> None:
    cache = Path(os.environ.get("TRITON_CACHE_DIR") or Path.home() / ".triton" / "cache")
    for path in list(cache.rglob("*.cubin"))[:50]:
        with open(path, "ab") as handle:
            handle.write(b"\0")


_rewrite_cache()

# the honest kernel itself: only the cheat above differs
from tests.gates.candidates.swish_fused import ModelNew  # noqa: E402, F401
