"""The campaign carries triage by reference (patch ``triage-by-reference``).

After segmentation went by reference, triage was what grew with the model: its
result holds every searched target's signature and the per-kernel table, and
the state kept a second copy of the targets.  Now the full result is stored,
the state carries a ``TriageRef`` and a ``TargetPlan``, and CPU activities hand
out one target at a time.  Sizes and the
synthetic models come from tests/support/by_reference.py (the campaign
itself runs in tests/kernelopt/compile/test_segment_by_reference.py).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from activities import compile_activities as acts
from activities import report_activities
from kernelopt.agents.facts import build_facts, with_context
from kernelopt.compile.segment_scope import scope_segment
from kernelopt.compile.triage_store import load_plan, load_triage, store_triage
from kernelopt.contracts import (
    CampaignState,
    Outcome,
    OutcomeCategory,
    PlanLookupInput,
    ReportInput,
    SearchMode,
    TargetKind,
)
from kernelopt.proposer.plan import plan_targets
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

# the module's home, its store and its synthetic models
home, store, models = module_fixtures("triageref")


def test_the_state_after_triage_no_longer_grows_with_the_model(
    models: dict[int, Model], store: ArtifactStore
) -> None:
    """Inline, triage and its targets (twice) grew the state; by reference they do not."""
    inline, by_ref = {}, {}
    for n, m in models.items():
        inline[n] = payload_size(
            CampaignState(
                compiled=m.compiled,
                segment_ref=m.segment_ref,
                triage=m.triage,
                targets=list(m.triage.targets),
            )
        )
        plan = plan_targets(m.plan_input(), store)
        by_ref[n] = payload_size(
            CampaignState(
                compiled=m.compiled, segment_ref=m.segment_ref, triage_ref=m.triage_ref, plan=plan
            )
        )
    assert inline[LARGE] > 256 * KIB, inline  # what continue-as-new carried at 300 kernels
    assert abs(by_ref[LARGE] - by_ref[SMALL]) < 1 * KIB, by_ref
    assert by_ref[LARGE] < 8 * KIB, by_ref
    # triage's own result, as the activity returned it, against its reference
    assert payload_size(models[LARGE].triage) > 128 * KIB
    assert payload_size(models[LARGE].triage_ref) < 2 * KIB
    assert abs(payload_size(models[LARGE].triage_ref) - payload_size(models[SMALL].triage_ref)) < 64


def test_the_new_activities_inputs_and_results_stay_small(
    models: dict[int, Model], store: ArtifactStore
) -> None:
    """Every payload of the by-reference steps, kernel targets' scopes included, is flat in n."""
    sizes: dict[str, dict[int, int]] = {}
    for n, m in models.items():
        plan = plan_targets(m.plan_input(**BUILTIN), store)
        targets = load_plan(plan, store)
        kernel = next(i for i, t in enumerate(targets) if t.kind == TargetKind.KERNEL)
        ids = [t.id for t in targets[:4]]  # a campaign looks up its winners only
        measured = {
            "plan input": m.plan_input(**BUILTIN),
            "plan": plan,
            "scope input": m.scope_input(plan, kernel),
            "lookup input": PlanLookupInput(plan=plan, ids=ids),
        }
        for name, value in measured.items():
            sizes.setdefault(name, {})[n] = payload_size(value)
    for name, by_n in sizes.items():
        assert abs(by_n[LARGE] - by_n[SMALL]) < 1 * KIB, (name, by_n)
        assert by_n[LARGE] < 8 * KIB, (name, by_n)


async def test_a_kernel_targets_scope_is_flat_and_the_forwards_goes_by_reference(
    models: dict[int, Model], store: ArtifactStore, home: Path, monkeypatch
) -> None:
    """What a search gets: a kernel target's part stays small; the whole forward's is the model.

    The forward target (the built-in rewrite family's) covers every kernel, so its
    scoped segmentation inline, and with it that search's input, grows with the
    model; asked by reference (patch "scope-by-reference") it stays in the store.
    A kernel target's scope keeps no library call or fusion group
    (compile/segment_scope.py), so it is flat even inline.
    """
    monkeypatch.setenv("KERNELOPT_HOME", str(home))
    scopes: dict[tuple[str, bool], dict[int, int]] = {}
    inputs: dict[bool, dict[int, int]] = {}
    env = ActivityEnvironment()
    for n, m in models.items():
        plan = plan_targets(m.plan_input(**BUILTIN), store)
        targets = load_plan(plan, store)
        kernel = next(i for i, t in enumerate(targets) if t.kind == TargetKind.KERNEL)
        forward = next(i for i, t in enumerate(targets) if t.kind == TargetKind.FORWARD)
        for by_ref in (False, True):
            for name, index in (("kernel", kernel), ("forward", forward)):
                asked = m.scope_input(plan, index).model_copy(update={"by_reference": by_ref})
                scope = await env.run(acts.target_scope, asked)
                scopes.setdefault((name, by_ref), {})[n] = payload_size(scope)
                if name == "forward":
                    inputs.setdefault(by_ref, {})[n] = payload_size(m.search_input(scope))
    for by_ref in (False, True):
        kernel_sizes = scopes[("kernel", by_ref)]
        assert abs(kernel_sizes[LARGE] - kernel_sizes[SMALL]) < 256, scopes
    assert scopes[("forward", False)][LARGE] > 10 * scopes[("forward", False)][SMALL], scopes
    assert inputs[False][LARGE] > 10 * inputs[False][SMALL], inputs
    assert scopes[("forward", True)][LARGE] < 32 * KIB, scopes
    assert inputs[True][LARGE] < 32 * KIB, inputs


def test_a_stored_triage_reads_back_equal_and_its_reference_carries_the_numbers(
    models: dict[int, Model], store: ArtifactStore
) -> None:
    m = models[LARGE]
    ref = m.triage_ref
    assert load_triage(ref, store) == m.triage
    assert store_triage(m.triage, store).artifact == ref.artifact  # content-addressed
    t = m.triage
    assert (ref.library_fraction, ref.ceilings, ref.verdict, ref.required_speedup) == (
        t.library_fraction,
        t.ceilings,
        t.verdict,
        t.required_speedup,
    )
    assert (ref.searched, ref.deferred, ref.timed) == (
        len(t.targets),
        len(t.deferred_targets),
        len(t.per_kernel),
    )
    assert ref.searched > 0 and ref.deferred > 0  # the synthetic tail is cut


def test_the_plan_orders_targets_as_the_campaign_searches_them(
    models: dict[int, Model], store: ArtifactStore
) -> None:
    m = models[LARGE]
    # an LLM campaign searches triage's targets, in triage's order
    llm = plan_targets(m.plan_input(), store)
    assert load_plan(llm, store) == m.triage.targets
    assert (llm.count, llm.kernel_targets) == (len(m.triage.targets), len(m.triage.targets))

    # the built-in proposer: its rewrite forward first, then single kernels by share
    builtin = load_plan(plan_targets(m.plan_input(**BUILTIN), store), store)
    head, rest = builtin[0], builtin[1:]
    assert head.kind == TargetKind.FORWARD
    assert rest and all(t.kind == TargetKind.KERNEL and t.kernels == [t.id] for t in rest)
    times = {k.name: k.ms for k in m.triage.per_kernel}
    assert [t.share for t in rest] == [times[t.id] / m.triage.total_ms for t in rest]
    assert [t.share for t in rest] == sorted((t.share for t in rest), reverse=True)
    assert len(rest) < len(m.segment.kernels)  # the cut-off applies to them too

    capped = load_plan(plan_targets(m.plan_input(**BUILTIN, max_targets=3), store), store)
    assert capped == [head, *rest[:3]]  # max_targets bounds the kernel searches
    no_groups = load_plan(plan_targets(m.plan_input(skip_fusion_groups=True), store), store)
    assert no_groups == [t for t in m.triage.targets if t.kind != TargetKind.FUSION_GROUP]
    assert len(no_groups) < len(m.triage.targets)


def test_the_builtin_plan_drops_kernels_that_together_cannot_reach_gamma(
    models: dict[int, Model], store: ArtifactStore
) -> None:
    """Kernels that hold too little of the model's GPU time to make it gamma faster even
    if infinitely fast are not searched beside the whole forward; an LLM's plan keeps
    them, and so does the built-in one where they could reach gamma."""
    m = models[SMALL]
    little = m.triage.model_copy(
        update={"triton_ms": 0.02, "library_ms": 2.0, "total_ms": 2.02, "gamma": 1.03}
    )
    short = m.plan_input(**BUILTIN).model_copy(update={"triage": store_triage(little, store)})
    planned = plan_targets(short, store)
    assert [t.kind for t in load_plan(planned, store)] == [TargetKind.FORWARD]
    assert planned.kernels_short.startswith("every Triton kernel together holds 1.0%")
    llm = m.plan_input().model_copy(update={"triage": short.triage})
    assert load_plan(plan_targets(llm, store), store) == m.triage.targets
    assert plan_targets(llm, store).kernels_short == ""
    enough = little.model_copy(update={"gamma": 1.005})  # 1% of the time reaches 1.005x
    wide = short.model_copy(update={"triage": store_triage(enough, store)})
    kept = plan_targets(wide, store)
    assert kept.count > 1 and kept.kernels_short == ""


async def test_target_scope_hands_out_the_target_its_part_and_its_facts(
    models: dict[int, Model], store: ArtifactStore, home: Path, monkeypatch
) -> None:
    monkeypatch.setenv("KERNELOPT_HOME", str(home))
    m = models[SMALL]
    plan = plan_targets(m.plan_input(), store)
    env = ActivityEnvironment()
    for index, target in enumerate(load_plan(plan, store)):
        scope = await env.run(acts.target_scope, m.scope_input(plan, index))
        assert scope.target == target
        assert scope.segment == scope_segment(m.segment, target)
        facts = build_facts(m.compiled, scope.segment, target, m.triage)
        # the activity adds what needs the whole segmentation (neighbours) and the compile
        assert scope.facts == with_context(facts, m.compiled, m.segment, target, m.triage)
    with pytest.raises(ApplicationError) as err:
        await env.run(acts.target_scope, m.scope_input(plan, plan.count))
    assert err.value.non_retryable

    wanted = [t.id for t in load_plan(plan, store)[1:3]]
    found = await env.run(acts.plan_lookup, PlanLookupInput(plan=plan, ids=[*wanted, "nope"]))
    assert [t.id for t in found.targets] == wanted


def _fallback(**fields: object) -> Outcome:
    """A fallback outcome of the synthetic problem, for its report."""
    return Outcome(
        campaign_id="triageref",
        problem="synthetic",
        category=OutcomeCategory.FALLBACK,
        speedup=1.0,
        reason="test",
        **fields,  # type: ignore[arg-type]
    )


async def _report_text(outcome: Outcome, store: ArtifactStore) -> str:
    result = await ActivityEnvironment().run(
        report_activities.write_report, ReportInput(outcome=outcome)
    )
    return store.get_text(result.report)


async def test_the_report_loads_the_full_triage_by_reference(
    models: dict[int, Model], store: ArtifactStore, home: Path, monkeypatch
) -> None:
    """The outcome carries the reference; the report's ranked-target table comes from the store."""
    monkeypatch.setenv("KERNELOPT_HOME", str(home))
    m = models[LARGE]
    outcome = _fallback(mode=SearchMode.MULTI, triage_ref=m.triage_ref)
    assert payload_size(outcome) < 4 * KIB
    text = await _report_text(outcome, store)
    assert f"Search cut-off: {m.triage.cutoff}." in text
    assert f"| 1 | {m.triage.targets[0].id} |" in text
    assert f"{m.triage_ref.deferred} targets below the cut-off" in text


async def test_a_builtin_report_says_why_no_single_kernel_was_searched(
    models: dict[int, Model], store: ArtifactStore, home: Path, monkeypatch
) -> None:
    monkeypatch.setenv("KERNELOPT_HOME", str(home))
    m = models[SMALL]
    little = m.triage.model_copy(update={"triton_ms": 0.02, "library_ms": 2.0, "total_ms": 2.02})
    # the outcome quotes what each plan recorded (the workflow copies TargetPlan.kernels_short)
    ref = store_triage(little, store)
    plans = {
        proposer: plan_targets(m.plan_input(**levers).model_copy(update={"triage": ref}), store)
        for proposer, levers in (("builtin (no LLM)", BUILTIN), ("LLM model-x", {}))
    }
    texts = {}
    for proposer, plan in plans.items():
        outcome = _fallback(
            mode=SearchMode.SINGLE,
            proposer=proposer,
            triage_ref=ref,
            kernels_short=plan.kernels_short,
        )
        texts[proposer] = await _report_text(outcome, store)
    line = "Kernel targets: every Triton kernel together holds 1.0% of the model's GPU time"
    assert (
        line in texts["builtin (no LLM)"] and "at most 1.010x faster" in texts["builtin (no LLM)"]
    )
    assert "Kernel targets:" not in texts["LLM model-x"]
