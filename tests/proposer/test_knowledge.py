"""The knowledge layer: built-in wins are remembered by family and pattern, and steer the split."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelopt.agents.roles import mechanical_experience
from kernelopt.compile.wrapper_parse import parse_wrapper
from kernelopt.contracts import ProposerConfig
from kernelopt.contracts.compiled import (
    CompileResult,
    SearchTarget,
    SegmentResult,
    TargetKind,
)
from kernelopt.contracts.search import (
    BuiltinProposeInput,
    Candidate,
    Decision,
    Experience,
    SummarizeInput,
)
from kernelopt.memory import ExperienceMemory
from kernelopt.proposer.builtin import propose
from kernelopt.proposer.knowledge import (
    family_gains,
    family_of,
    gain_of,
    pattern_of,
    template_share,
)
from kernelopt.store import ArtifactStore, open_store

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "wrappers"
SOFTMAX = "level1_009_softmax_rows"
KIND = ["kind/reduction", "target/kernel"]


@pytest.fixture
def store(tmp_path: Path) -> ArtifactStore:
    return open_store(tmp_path / "artifacts")


def test_labels_name_their_family_and_pattern() -> None:
    assert family_of("template:softmax:BLOCK=1024,ROWS=2,num_warps=4") == "template"
    assert pattern_of("template:softmax:BLOCK=1024,ROWS=2,num_warps=4") == "template:softmax"
    assert family_of("rewrite:diag-broadcast") == "rewrite"
    assert pattern_of("rewrite:diag-broadcast") == "rewrite:diag-broadcast"
    assert family_of("XBLOCK=1024,num_warps=4") == "launch-config"
    assert family_of("no-eviction-hints") == "launch-config"
    assert gain_of("1.240x per kernel on k") == 1.24 and gain_of("faster") is None


def _won(label: str, speedup: float) -> Decision:
    cand = Candidate(
        id=label, target_id="k", parent_id="root", iteration=0, source=None, label=label
    )
    return Decision(candidate=cand, accepted=True, reason="", speedup=speedup)


def _summary(*decisions: Decision) -> SummarizeInput:
    target = SearchTarget(id="k", kind=TargetKind.KERNEL, kernels=["k"])
    return SummarizeInput(
        target=target,
        outcomes=[],
        decisions=list(decisions),
        proposer=ProposerConfig(),
        use_llm=False,
        tags=KIND,
    )


def test_a_template_win_is_remembered_as_the_template_with_its_gain() -> None:
    (lesson,) = mechanical_experience(
        _summary(_won("XBLOCK=512", 1.05), _won("template:softmax:BLOCK=512,ROWS=1", 1.24))
    )
    assert lesson.action.startswith("use the expert template template:softmax")
    assert "direction/template" in lesson.tags and "pattern/template/softmax" in lesson.tags
    assert gain_of(lesson.effect) == 1.24


def _memory(*lessons: tuple[str, str, float]) -> ExperienceMemory:
    memory = ExperienceMemory()
    memory.add(
        Experience(
            situation=f"{kind} kernel",
            action="a",
            effect=f"{gain:.3f}x per kernel on k",
            tags=[f"kind/{kind}", f"direction/{family}"],
        )
        for kind, family, gain in lessons
    )
    return memory


def test_gains_transfer_only_between_kernels_of_the_same_kind() -> None:
    memory = _memory(("reduction", "template", 1.3), ("pointwise", "launch-config", 1.1))
    assert family_gains(memory, KIND) == {"template": 1.3}
    assert family_gains(memory, ["kind/pointwise"]) == {"launch-config": 1.1}
    assert family_gains(memory, ["target/kernel"]) == {}  # no kind: nothing transfers


def test_the_split_follows_what_won() -> None:
    assert template_share(4, {}) == 2
    assert template_share(4, {"template": 1.2}) == 4
    assert template_share(4, {"template": 1.2, "launch-config": 1.5}) == 2
    assert template_share(4, {"launch-config": 1.1}) == 1
    assert template_share(1, {"launch-config": 1.1}) == 0


def _softmax_input(store: ArtifactStore, memory: ExperienceMemory | None) -> BuiltinProposeInput:
    wrapper = (FIXTURES / f"{SOFTMAX}.py.txt").read_text()
    (kernel,) = parse_wrapper(wrapper).kernels.values()
    compiled = CompileResult.model_validate_json((FIXTURES / f"{SOFTMAX}.compile.json").read_text())
    compiled = compiled.model_copy(update={"wrapper": store.put_text(wrapper, name="w.py")})
    segment = SegmentResult.model_validate_json((FIXTURES / f"{SOFTMAX}.segment.json").read_text())
    target = SearchTarget(id=kernel.name, kind=TargetKind.KERNEL, kernels=[kernel.name])
    return BuiltinProposeInput(
        compiled=compiled,
        segment=segment,
        target=target,
        state_source=store.put_text(kernel.source, name=f"{kernel.name}.py"),
        count=4,
        memory=memory.save(store) if memory is not None else None,
        memory_tags=KIND,
    )


def _families(store: ArtifactStore, memory: ExperienceMemory | None) -> list[str]:
    return [family_of(v.label) for v in propose(_softmax_input(store, memory), store).variants]


def test_the_builtin_proposer_gives_the_remembered_winner_the_round(store) -> None:
    plain = _families(store, None)
    assert plain.count("template") == 2 and plain.count("launch-config") == 2
    template_won = _families(store, _memory(("reduction", "template", 1.24)))
    assert template_won == ["template"] * 4
    launch_won = _families(store, _memory(("reduction", "launch-config", 1.08)))
    assert launch_won.count("template") == 1 and launch_won.count("launch-config") == 3
    elsewhere = _families(store, _memory(("pointwise", "template", 2.0)))
    assert elsewhere == plain  # another kind of kernel teaches nothing here
