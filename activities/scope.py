"""A search step's scoped segmentation, loaded where the step runs (``compile/segment_store.py``).

Since "scope-by-reference" a search carries a ``ScopeRef`` instead of its
target's segmentation; the profile, proposal, screening and gate activities load
it here before their library code (or its child process) reads ``segment``.
"""

from __future__ import annotations

from kernelopt.compile.segment_store import SearchStep, with_scope
from kernelopt.store import open_store

from .heartbeat import in_thread_final


async def resolve_scope(inp: SearchStep) -> SearchStep:
    """``inp`` with its segmentation inline; a scope that names none fails for good."""
    if inp.segment is not None:
        return inp
    return await in_thread_final(with_scope, inp, open_store())


__all__ = ["resolve_scope"]
