"""The gate activities: registered names, supervised child, results as data."""

from __future__ import annotations

from activities import gate_activities
from kernelopt.contracts import names


def test_activity_names_and_exports() -> None:
    defs = {a.__temporal_activity_definition.name for a in gate_activities.GPU_ACTIVITIES}  # type: ignore[attr-defined]
    assert defs == {names.GATE_CANDIDATE, names.GATE_MODEL}


def test_entry_points_resolve_with_typed_inputs() -> None:
    import inspect
    import typing

    from gates import campaign
    from kernelopt.contracts import CandidateGateInput, ModelGateInput

    for fn, inp in (
        (campaign.gate_candidate, CandidateGateInput),
        (campaign.gate_model, ModelGateInput),
    ):
        params = list(inspect.signature(fn).parameters)
        assert params == ["inp", "store"]
        assert typing.get_type_hints(fn)["inp"] is inp
