"""The built-in proposer, saying where it ran: the process and the GPU lease it held."""

from __future__ import annotations

import os

from gates.gpu_lease import held_mode
from kernelopt.contracts.search import BuiltinProposeInput, BuiltinProposeResult
from kernelopt.proposer import builtin
from kernelopt.store import ArtifactStore


def propose(inp: BuiltinProposeInput, store: ArtifactStore) -> BuiltinProposeResult:
    result = builtin.propose(inp, store)
    return result.model_copy(update={"note": f"pid={os.getpid()} lease={held_mode()}"})
