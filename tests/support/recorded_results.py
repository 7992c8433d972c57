"""The compile, segment and triage results recorded for one wrapper fixture, as models.

Tests that render or rank a recorded problem need all three, validated the same way.
"""

from __future__ import annotations

from kernelopt.contracts.compiled import CompileResult, SegmentResult, TriageResult
from tests.support.wrappers import fixture_json


def recorded_results(name: str) -> tuple[CompileResult, SegmentResult, TriageResult]:
    """The fixture ``name``'s recorded compile, segment and triage results."""
    return (
        CompileResult.model_validate(fixture_json(name, "compile")),
        SegmentResult.model_validate(fixture_json(name, "segment")),
        TriageResult.model_validate(fixture_json(name, "triage")),
    )
