"""A search gets its target's scope by reference (patch ``scope-by-reference``).

After segmentation and triage went by reference, what still grew with the model
was what one search carries: the whole forward's scoped segmentation (every
kernel) rode in ``target_scope``'s result, the search's input and every profile,
proposal, screening and gate input -- a megabyte at 300 kernels -- and a single
kernel's scope kept every library call and fusion group.  Now ``target_scope``
stores the scope and returns a ``ScopeRef`` with facts bounded to the slowest
kernels, and the activities load it.  The payload sizes, synthetic models and module
fixtures are those of tests/support/by_reference.py, shared with the triage test; the
campaign itself runs in tests/kernelopt/compile/test_segment_by_reference.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from activities import compile_activities as acts
from activities.scope import resolve_scope
from kernelopt.agents.facts import build_facts
from kernelopt.compile.segment_scope import scope_segment
from kernelopt.compile.segment_store import SegmentMissingError, load_scope, with_scope
from kernelopt.compile.triage_store import load_plan
from kernelopt.contracts import (
    BuiltinProposeInput,
    CandidateGateInput,
    ProfileInput,
    ScopeRef,
    TargetKind,
    TargetPlan,
    TargetScope,
)
from kernelopt.contracts.screening import ScreenCandidate, ScreenInput
from kernelopt.contracts.search import (
    FACT_KERNELS,
    ExecuteInput,
    Plan,
    PlanInput,
    ProposerConfig,
)
from kernelopt.proposer.plan import plan_targets
from kernelopt.proposer.targets import rewrite_target
from kernelopt.store import ArtifactStore
from tests.support.by_reference import (
    BUILTIN,
    KIB,
    LARGE,
    SMALL,
    Model,
    module_fixtures,
    payload_size,
)

# what any one workflow input, activity input or result of a by-reference search may be
# at 300 kernels; Temporal warns at 512 KB and fails a payload at 2 MB
BOUND = 128 * KIB


# the module's home, its store and its synthetic models
home, store, models = module_fixtures("scoperef")


def _plan(m: Model, store: ArtifactStore) -> TargetPlan:
    """The built-in proposer's plan: the whole forward first, then single kernels."""
    return plan_targets(m.plan_input(**BUILTIN), store)


async def _scope(m: Model, store: ArtifactStore, kind: TargetKind, by_ref: bool) -> TargetScope:
    plan = _plan(m, store)
    index = next(i for i, t in enumerate(load_plan(plan, store)) if t.kind == kind)
    inp = m.scope_input(plan, index).model_copy(update={"by_reference": by_ref})
    return await ActivityEnvironment().run(acts.target_scope, inp)


def _search_payloads(m: Model, scope: TargetScope) -> dict[str, object]:
    """The search's input and the inputs its activities get, built as search_kernel builds them."""
    search = m.search_input(scope)
    source = scope.target.source or m.compiled.wrapper
    common = {"compiled": search.compiled, "segment": search.segment, "scope": search.scope}
    times = {k.name: k.ms for k in (search.facts.inductor_kernels if search.facts else []) if k.ms}
    return {
        "search input": search,
        "profile input": ProfileInput(
            **common, target=search.target, source=source, kernel_times=times
        ),
        "propose input": BuiltinProposeInput(**common, target=search.target, state_source=source),
        "screen input": ScreenInput(
            **common,
            target=search.target,
            candidates=[ScreenCandidate(candidate_id=f"c{i}", source=source) for i in range(8)],
        ),
        "gate input": CandidateGateInput(
            **common, target=search.target, candidate_id="c0", source=source
        ),
        "plan input": PlanInput(
            target=search.target, state_source=source, proposer=ProposerConfig()
        ),
        "execute input": ExecuteInput(
            target=search.target,
            state_source=source,
            plan=Plan(direction="d", description="d"),
            proposer=ProposerConfig(),
            facts=search.facts,
        ),
    }


async def test_no_payload_of_a_search_exceeds_the_bound_at_300_kernels(
    models: dict[int, Model], store: ArtifactStore, home: Path, monkeypatch
) -> None:
    """By reference every search payload stays under BOUND; inline the forward's were a megabyte."""
    monkeypatch.setenv("KERNELOPT_HOME", str(home))
    sizes: dict[tuple[str, str, bool], dict[int, int]] = {}
    for n, m in models.items():
        for kind in (TargetKind.KERNEL, TargetKind.FORWARD):
            for by_ref in (False, True):
                scope = await _scope(m, store, kind, by_ref)
                measured = {"scope input": m.scope_input(_plan(m, store), 0), "scope": scope}
                measured.update(_search_payloads(m, scope))
                for name, value in measured.items():
                    sizes.setdefault((kind.value, name, by_ref), {})[n] = payload_size(value)
    for (kind, name, by_ref), by_n in sizes.items():
        if by_ref:
            assert by_n[LARGE] < BOUND, (kind, name, by_n)
        if kind == TargetKind.KERNEL.value:  # a single kernel's payloads are flat in n
            assert abs(by_n[LARGE] - by_n[SMALL]) < 1 * KIB, (kind, name, by_ref, by_n)
    forward = {
        name: (sizes[("forward", name, False)][LARGE], sizes[("forward", name, True)][LARGE])
        for name in ("scope", "search input", "gate input", "screen input", "profile input")
    }
    for name, (inline, by_ref) in forward.items():
        assert inline > 512 * KIB, (name, forward)  # Temporal's warning; inline, the whole model
        assert by_ref < 32 * KIB, (name, forward)
    # what still grows: the forward target's kernel names (the plan's), ~33 B a kernel
    grown = sizes[("forward", "search input", True)]
    assert grown[LARGE] - grown[SMALL] < 290 * 40 + 12 * KIB, grown


async def test_the_stored_scope_loads_back_as_the_inline_one(
    models: dict[int, Model], store: ArtifactStore, home: Path, monkeypatch
) -> None:
    monkeypatch.setenv("KERNELOPT_HOME", str(home))
    m = models[LARGE]
    for kind in (TargetKind.KERNEL, TargetKind.FORWARD):
        inline = await _scope(m, store, kind, False)
        by_ref = await _scope(m, store, kind, True)
        assert by_ref.segment is None and by_ref.scope is not None
        assert by_ref.target == inline.target
        stored = load_scope(by_ref.scope, store)
        assert stored == inline  # the scoped segmentation and the full facts
        assert inline.segment == scope_segment(m.segment, inline.target)
        ref = by_ref.scope
        assert (ref.target, ref.kernels, ref.library_calls, ref.fusion_groups) == (
            inline.target.id,
            len(inline.segment.kernels),
            len(inline.segment.library_calls),
            len(inline.segment.fusion_groups),
        )
        first = next(k for k in m.segment.kernels if k.name == inline.target.kernels[0])
        assert ref.kernel_kind == first.kind != ""

        facts = inline.facts
        assert facts is not None and by_ref.facts == facts.bounded()
        source = inline.target.source or m.compiled.wrapper
        loaded = with_scope(
            ProfileInput(
                compiled=m.compiled,
                scope=ref,
                target=by_ref.target,
                source=source,
                kernel_times={"x": 1.0},
            ),
            store,
        )
        assert loaded.segment == inline.segment
        whole = {k.name: k.ms for k in facts.inductor_kernels if k.ms}
        # a profile gets every kernel's time back; a kernel target's facts list none
        assert loaded.kernel_times == (whole or {"x": 1.0})
        gate = CandidateGateInput(
            compiled=m.compiled, scope=ref, target=by_ref.target, candidate_id="c", source=source
        )
        assert (await resolve_scope(gate)).segment == inline.segment


async def test_a_scope_that_cannot_load_fails_for_good(
    models: dict[int, Model], store: ArtifactStore, home: Path, monkeypatch
) -> None:
    monkeypatch.setenv("KERNELOPT_HOME", str(home))
    m = models[SMALL]
    target = m.segment.targets[0]
    bare = CandidateGateInput(
        compiled=m.compiled, target=target, candidate_id="c", source=target.source
    )
    with pytest.raises(SegmentMissingError):
        with_scope(bare, store)
    with pytest.raises(ApplicationError) as err:
        await resolve_scope(bare)
    assert err.value.non_retryable
    # a stored scope without its segmentation (not what target_scope writes) is refused too
    empty = store.put_json(TargetScope(target=target), name="empty.scope.json")
    ref = ScopeRef(artifact=empty, target=target.id)
    with pytest.raises(SegmentMissingError):
        with_scope(bare.model_copy(update={"scope": ref}), store)
    inline = bare.model_copy(update={"segment": m.segment, "scope": ref})
    assert with_scope(inline, store) is inline  # an inline segmentation is used as it is


def test_a_scope_keeps_what_its_kind_of_target_reads(models: dict[int, Model]) -> None:
    """A kernel: its kernel only.  A group: its kernels and the groups (indexed by number).
    The forward: everything (it is the model; a search gets it by reference)."""
    for m in models.values():
        segment = m.segment
        by_kind = {t.kind: t for t in m.triage.targets}
        kernel, group = by_kind[TargetKind.KERNEL], by_kind[TargetKind.FUSION_GROUP]
        one = scope_segment(segment, kernel)
        assert [k.name for k in one.kernels] == kernel.kernels
        assert one.library_calls == [] and one.fusion_groups == []
        fused = scope_segment(segment, group)
        assert [k.name for k in fused.kernels] == group.kernels
        assert fused.library_calls == [] and fused.fusion_groups == segment.fusion_groups
        index = int(group.id.removeprefix("group"))
        assert segment.fusion_groups[index].kernels == group.kernels  # what re-stitch reads
        forward = rewrite_target(m.compiled, segment, list(segment.targets))
        whole = scope_segment(segment, forward)
        assert (whole.kernels, whole.library_calls, whole.fusion_groups) == (
            segment.kernels,
            segment.library_calls,
            segment.fusion_groups,
        )
        # the facts read no library call or group: the same from a scope as from the whole
        for target in (kernel, group):
            assert build_facts(m.compiled, scope_segment(segment, target), target, m.triage) == (
                build_facts(m.compiled, segment, target, m.triage)
            )
    # a single kernel's scope is bounded: the same size at 10 and 300 kernels
    sizes = {}
    for n, m in models.items():
        kernel = next(t for t in m.triage.targets if t.kind == TargetKind.KERNEL)
        sizes[n] = payload_size(scope_segment(m.segment, kernel))
    assert abs(sizes[LARGE] - sizes[SMALL]) < 256 and sizes[LARGE] < 4 * KIB, sizes


def test_bounded_facts_list_the_slowest_kernels_and_count_the_rest(
    models: dict[int, Model],
) -> None:
    m = models[LARGE]
    forward = rewrite_target(m.compiled, m.segment, list(m.segment.targets))
    facts = build_facts(m.compiled, m.segment, forward, m.triage)
    assert len(facts.inductor_kernels) == len(m.segment.kernels) > FACT_KERNELS
    bounded = facts.bounded()
    assert bounded.inductor_kernels == facts.inductor_kernels[:FACT_KERNELS]
    assert bounded.inductor_kernels_left_out == len(m.segment.kernels) - FACT_KERNELS
    assert bounded.dominant_kernel == facts.dominant_kernel == bounded.inductor_kernels[0].name
    rest = bounded.model_copy(update={"inductor_kernels": [], "inductor_kernels_left_out": 0})
    assert rest == facts.model_copy(update={"inductor_kernels": []})  # nothing else changes
    s = models[SMALL]
    small = build_facts(
        s.compiled,
        s.segment,
        rewrite_target(s.compiled, s.segment, list(s.segment.targets)),
        s.triage,
    )
    assert small.bounded() is small  # at most FACT_KERNELS: as built
