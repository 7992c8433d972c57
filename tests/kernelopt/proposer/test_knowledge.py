"""The knowledge layer: built-in wins are remembered by family and pattern, and steer the split."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelopt.agents.roles import mechanical_experience
from kernelopt.compile.wrapper_parse import parse_wrapper
from kernelopt.contracts import ProblemSpec, ProposerConfig
from kernelopt.contracts.compiled import SearchMode, SearchTarget, SegmentResult, TargetKind
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
    regen_first,
    template_share,
)
from kernelopt.store import ArtifactStore, open_store
from tests.support.compiled import stub_compiled
from tests.support.recorded_results import recorded_results
from tests.support.wrappers import wrapper_text

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
    assert family_of("regen:persistent_reductions=False") == "regen"
    assert pattern_of("regen:persistent_reductions=False") == "regen:persistent_reductions=False"
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


def test_a_regeneration_win_is_remembered_as_its_inductor_options() -> None:
    (lesson,) = mechanical_experience(_summary(_won("regen:persistent_reductions=False", 1.1)))
    assert lesson.action.startswith("regenerate the forward with Inductor under regen:")
    assert "direction/regen" in lesson.tags
    assert "pattern/regen/persistent_reductions=False" in lesson.tags


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
    wrapper = wrapper_text(SOFTMAX)
    (kernel,) = parse_wrapper(wrapper).kernels.values()
    compiled, segment, _ = recorded_results(SOFTMAX)
    compiled = compiled.model_copy(update={"wrapper": store.put_text(wrapper, name="w.py")})
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


def test_a_forward_round_leads_with_the_family_that_won(store, monkeypatch, tmp_path) -> None:
    """Rewrites lead a forward round (cheap, rare); a remembered regeneration win leads instead."""
    import kernelopt.proposer.regen as regen
    import kernelopt.proposer.regen.family as regen_family

    assert not regen_first({}) and regen_first({"regen": 1.1})
    assert not regen_first({"regen": 1.1, "rewrite": 1.5})
    problem = HEAD + (
        "class Model(nn.Module):\n"
        "    def forward(self, x, v):\n"
        "        return torch.diag(v) @ x\n"
        "def get_inputs():\n    return [torch.randn(4, 4), torch.randn(4)]\n"
        "def get_init_inputs():\n    return []\n"
    )

    def distinct(source, seed, device, options):  # every option set: code of its own
        return repr(sorted(options.items()))

    def build(source, seed, device, options, diff):
        return regen.HEADER + "{}\n" + source

    family = regen.RegenFamily(cache_dir=tmp_path / "regen", generate=distinct, build=build)
    monkeypatch.setattr(regen_family, "FAMILY", family)

    def families(memory: ExperienceMemory | None) -> list[str]:
        inp = _forward_input(store, problem, memory)
        return [family_of(v.label) for v in propose(inp, store).variants]

    assert families(None) == ["rewrite", "regen", "regen"]  # the cap: two regenerations
    won = _memory(("reduction", "regen", 1.2))
    assert families(won) == ["regen", "regen", "rewrite"]


HEAD = "import torch\nimport torch.nn as nn\n"


def _forward_input(
    store: ArtifactStore, problem: str, memory: ExperienceMemory | None
) -> BuiltinProposeInput:
    target = SearchTarget(id="forward", kind=TargetKind.FORWARD)
    blob = store.put_text("unused in forward mode")
    compiled = stub_compiled(ProblemSpec(name="p", source=store.put_text(problem)), blob)
    segment = SegmentResult(
        kernels=[], library_calls=[], mode=SearchMode.SINGLE, mode_reason="t", targets=[target]
    )
    return BuiltinProposeInput(
        compiled=compiled,
        segment=segment,
        target=target,
        state_source=compiled.problem.source,
        count=3,
        memory=memory.save(store) if memory is not None else None,
        memory_tags=["kind/reduction", "target/forward"],  # the first kernel's kind
    )
