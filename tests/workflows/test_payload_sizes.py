"""At 10,000 candidates per target, no workflow payload nears Temporal's limits.

Unit level (a 10,000-candidate campaign on the dev server is too slow for CI):
a search at the default parameters (beam 4, plans 4, retries 4: 80 candidates
and ~85 LLM calls an iteration) is played through the workflow's own pieces --
``search_log.due``/``cut_pages`` at every iteration boundary and at the end,
the real ``SearchTree`` with its ``prune``, the experience cap -- with
realistic decisions (a 400-character plan, verdicts with feedback trimmed as
the workflow trims it).  Every payload the workflows would send is measured as
the pydantic data converter encodes it: each archive page, the state carried
across continue-as-new at every boundary, the iteration's summarize input,
the search's result, and the campaign's carried state and report input with
ten such targets.
"""

from __future__ import annotations

import hashlib

from temporalio.contrib.pydantic import pydantic_data_converter

from kernelopt.contracts import (
    ArtifactRef,
    CampaignState,
    Outcome,
    OutcomeCategory,
    ReportInput,
    SearchParams,
    SearchTarget,
    TargetKind,
)
from kernelopt.contracts.search import (
    Analysis,
    Bottleneck,
    Candidate,
    Decision,
    Experience,
    KernelProfile,
    LedgerEntry,
    Plan,
    ProfileResult,
    ProposerConfig,
    SearchKernelResult,
    SearchLogPage,
    SearchState,
    SummarizeInput,
)
from kernelopt.contracts.verdicts import GateName, GateStatus, GateVerdict
from workflows import search_log
from workflows.search_kernel import (
    EXPERIENCE_KEPT,
    PAGES_INLINE,
    PRUNED_SOURCES_KEPT,
    TREE_KEEP_BOUNDED,
    _compact,
)
from workflows.search_policy import ROOT_ID, SearchTree

CANDIDATES = 10_000
TARGETS = 10
LIMIT = 256 * 1024
PARAMS = SearchParams()  # the defaults: 4 plans x beam 4 x (1 + 4 retries)


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _ref(name: str) -> ArtifactRef:
    return ArtifactRef(sha256=_sha(name), size=4096, media_type="text/x-python", name=name)


def _size(value: object) -> int:
    return pydantic_data_converter.payload_converter.to_payloads([value])[0].ByteSize()


TARGET = SearchTarget(
    id="triton_per_fused_native_layer_norm_7",
    kind=TargetKind.KERNEL,
    kernels=["triton_per_fused_native_layer_norm_7"],
    source=_ref("root.py"),
    share=0.4,
)


def _decision(n: int, iteration: int, passed: bool) -> Decision:
    cid = f"{TARGET.id}:i{iteration}-s{n % 4}-p{n % 16 // 4}-a{n % 5}"
    static = GateVerdict(gate=GateName.STATIC, status=GateStatus.PASS, reason="imports and runs")
    second = GateVerdict(
        gate=GateName.CORRECTNESS,
        status=GateStatus.PASS if passed else GateStatus.FAIL,
        reason="max abs error 3.1e-2 > 1e-3 at seed 1 (held-out inputs, new values)",
        metrics={"max_abs_error": 3.1e-2, "max_rel_error": 0.4, "seed": 1, "elements": 1 << 20},
        thresholds={"rtol": 1e-3, "atol": 1e-3},
        feedback="Traceback (most recent call last):\n" + "x" * 3000,  # trimmed below
        gpu_seconds=3.2,
        log=_ref(f"{cid}.log"),
    )
    return Decision(
        candidate=Candidate(
            id=cid,
            target_id=TARGET.id,
            parent_id=ROOT_ID,
            iteration=iteration,
            source=_ref(f"{cid}.py"),
            plan=Plan(direction="vectorize-loads", description="d" * 400),
            proposer="llm:gpt-4o",
            attempt=n % 5,
            conversation=_ref(f"{cid}.conversation.json"),
        ),
        accepted=passed,
        deciding_gate="" if passed else "correctness",
        reason="passed gates 1-2; per-kernel 1.234x (0.0123 ms vs 0.0152 ms)",
        verdicts=_compact([static, second]),
        kernel_ms=0.0123,
        baseline_kernel_ms=0.0152,
        at="2026-12-01T10:00:00.000000+00:00",
        speedup=1.234,
    )


def _ledger(call: str) -> LedgerEntry:
    return LedgerEntry(
        role="executor",
        call_id=call,
        model="gpt-4o",
        prompt_tokens=12000,
        completion_tokens=3000,
        usd=0.05,
        prompt=_ref(f"{call}.prompt"),
        reply=_ref(f"{call}.reply"),
        at="2026-12-01T10:00:00.000000+00:00",
    )


PROFILE = ProfileResult(
    profile=KernelProfile(source="ncu", note="n" * 200, duration_us=12.0, top_rules=["r" * 80] * 5),
    analysis=Analysis(bottleneck=Bottleneck.MEMORY_BOUND, reasoning="a" * 400),
)


def _search(sizes: dict[str, int]) -> SearchKernelResult:
    """One target's search to 10,000 candidates; the largest payload of each kind in ``sizes``."""
    per_iteration = PARAMS.beam * PARAMS.plans * (1 + PARAMS.retries)
    tree = SearchTree.with_root(_sha("root"))
    s = SearchState(sources={ROOT_ID: TARGET.source}, profiles={ROOT_ID: PROFILE})
    iteration = 0
    while s.candidates_tried < CANDIDATES:
        decisions = []
        for n in range(per_iteration):
            passed = n % 3 != 0
            d = _decision(n, iteration, passed)
            decisions.append(d)
            s.candidates_tried += 1
            s.ledger.append(_ledger(d.candidate.id))
            if passed:
                tree.add_child(
                    ROOT_ID, d.candidate.id, _sha(d.candidate.id), iteration, 0.0123, 0.0152
                )
                s.candidates[d.candidate.id] = d.candidate
                s.sources[d.candidate.id] = d.candidate.source
        s.decisions += decisions
        winners = [d.candidate.id for d in decisions if d.accepted][: PARAMS.beam]
        for cid in winners:  # re-timed: eligible to seed later rounds, so pruning keeps some
            tree.apply_retime(cid, 0.0120, 0.0152, True)
            s.profiles[cid] = PROFILE  # a beam state is profiled before planning on it
        s.ledger += [_ledger(f"plan-{iteration}-{k}") for k in range(PARAMS.beam)]
        summarize = SummarizeInput(
            target=TARGET, outcomes=[], proposer=ProposerConfig(), decisions=decisions
        )
        sizes["summarize input"] = max(sizes.get("summarize input", 0), _size(summarize))
        s.experience += [Experience(situation="s" * 150, action="a" * 150, effect="e" * 100)] * 4
        del s.experience[:-EXPERIENCE_KEPT]
        iteration += 1
        s.iteration = iteration
        _archive(s, sizes, final=False)
        if len(tree.nodes) - 1 > 2 * TREE_KEEP_BOUNDED:  # as SearchKernel._prune_if_large
            for node_id in tree.prune(TREE_KEEP_BOUNDED, PARAMS.ucb_c):
                s.candidates.pop(node_id, None)
                s.sources.pop(node_id, None)
                s.profiles.pop(node_id, None)
            del tree.pruned_sources[:-PRUNED_SOURCES_KEPT]
        s.tree = tree.to_dict()
        carried = _size(s.model_dump(mode="json"))
        if carried > LIMIT:
            parts = {k: _size(v) for k, v in s.model_dump(mode="json").items()}
            print(iteration, sorted(parts.items(), key=lambda kv: -kv[1])[:5])
        sizes["carried search state"] = max(sizes.get("carried search state", 0), carried)
    _archive(s, sizes, final=True)
    best = next(iter(s.candidates.values()))
    result = SearchKernelResult(
        target_id=TARGET.id,
        best=best,
        decisions=s.decisions,
        ledger=s.ledger,
        experience=s.experience,
        log_pages=s.log_pages,
        candidates_tried=s.candidates_tried,
        root_profile=PROFILE,
        runners_up=[best, best],
    )
    sizes["search result"] = _size(result)
    return result


def _archive(s: SearchState, sizes: dict[str, int], final: bool) -> None:
    """As ``SearchKernel._archive_if_long`` (new histories)."""
    due = search_log.due(s.decisions, s.ledger, final)
    for decisions, ledger in search_log.cut_pages(s.decisions, s.ledger) if due else []:
        page = SearchLogPage(
            campaign_id="c", target_id=TARGET.id, decisions=decisions, ledger=ledger
        )
        sizes["archive page"] = max(sizes.get("archive page", 0), _size(page))
        sizes["pages"] = sizes.get("pages", 0) + 1
        s.log_pages.append(_ref(f"page-{sizes['pages']}"))
    s.decisions, s.ledger = [], []
    if len(s.log_pages) > PAGES_INLINE:
        index = SearchLogPage(campaign_id="c", target_id=TARGET.id, pages=s.log_pages)
        sizes["archive page"] = max(sizes["archive page"], _size(index))
        s.log_pages = [_ref(f"index-{sizes['pages']}")]


def test_ten_thousand_candidates_per_target_keep_every_payload_small() -> None:
    sizes: dict[str, int] = {}
    result = _search(sizes)
    assert result.candidates_tried >= CANDIDATES
    results = [result.model_copy(update={"target_id": f"t{k}"}) for k in range(TARGETS)]
    carried = [r.model_copy(update={"experience": []}) for r in results]  # as OptimizeModel
    state = CampaignState(results=carried, candidates_tried=TARGETS * result.candidates_tried)
    sizes["campaign state (10 targets)"] = _size(state)
    outcome = Outcome(
        campaign_id="c", problem="p", category=OutcomeCategory.MATCHED, speedup=1.0, reason="r"
    )
    report = ReportInput(
        outcome=outcome,
        decisions=[d for r in results for d in r.decisions],
        log_pages=[p for r in results for p in r.log_pages],
    )
    sizes["report input (10 targets)"] = _size(report)
    print(
        "\n"
        + "\n".join(
            f"{k}: {v / 1024:.1f} KiB" if k != "pages" else f"{k}: {v}" for k, v in sizes.items()
        )
    )
    pages = sizes.pop("pages")
    assert pages >= CANDIDATES // search_log.PAGE_ITEMS  # the log went to the store
    assert not result.decisions and not result.ledger  # ... all of it, by digest
    too_big = {k: v for k, v in sizes.items() if v > LIMIT}
    assert not too_big, too_big
