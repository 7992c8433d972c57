"""Candidate ids round-trip through their one type, in the text form stored histories hold."""

from __future__ import annotations

import pytest

from kernelopt.contracts.candidate_id import CandidateId


@pytest.mark.parametrize(
    "text",
    [
        "triton_poi_fused_add_0:i0-s1-p2-a3",
        "forward:i12-s0-v7",
        "k:with:colons:i1-s0-v0:retime",
        "triton_red_fused_softmax_0:i2-s3-p0-a0:retime",
    ],
)
def test_ids_parse_and_render_to_the_same_text(text: str) -> None:
    parsed = CandidateId.parse(text)
    assert parsed is not None and str(parsed) == text


def test_parts_are_named() -> None:
    llm = CandidateId.parse("k0:i4-s1-p2-a3")
    assert (llm.target, llm.iteration, llm.state, llm.plan, llm.attempt) == ("k0", 4, 1, 2, 3)
    assert llm.variant is None and not llm.retime
    builtin = CandidateId.parse("forward:i0-s2-v5")
    assert builtin.variant == 5 and builtin.plan is None
    assert str(builtin.retimed()) == "forward:i0-s2-v5:retime"


@pytest.mark.parametrize("text", ["hand-written", "k:i1-s2", "k:i1-s2-p3", "k:ix-s0-v0"])
def test_hand_written_ids_are_not_parsed(text: str) -> None:
    assert CandidateId.parse(text) is None
