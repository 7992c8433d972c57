"""One candidate through the campaign's gates 1-2 (``gates.campaign.gate_candidate``).

The GPU search and screening tests, the kinds' CPU test and the GPU scripts each put one
source through the gates for one target; this builds the ``CandidateGateInput`` they share.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kernelopt.contracts import ArtifactRef
    from kernelopt.contracts.compiled import CompileResult, SearchTarget, SegmentResult
    from kernelopt.contracts.verdicts import CandidateGateResult
    from kernelopt.store import ArtifactStore


def gate_source(
    store: ArtifactStore,
    compiled: CompileResult,
    segment: SegmentResult,
    target: SearchTarget,
    source: ArtifactRef,
    candidate_id: str,
    **fields: Any,
) -> CandidateGateResult:
    """``source`` as candidate ``candidate_id`` for ``target``, through gates 1-2.

    ``fields`` set the input's other fields (``timeout_s``, ``settings``, ...).  The gates
    are imported when a test or script runs, not when it is collected or parses arguments.
    """
    from gates.campaign import gate_candidate
    from kernelopt.contracts.verdicts import CandidateGateInput

    inp = CandidateGateInput(
        compiled=compiled,
        segment=segment,
        target=target,
        candidate_id=candidate_id,
        source=source,
        **fields,
    )
    return gate_candidate(inp, store)
