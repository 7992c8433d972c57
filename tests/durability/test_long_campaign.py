"""A synthetic campaign of more than 1,000 candidates, driven through continue-as-new boundaries.

Real workflows and CPU activities; the LLM is the scripted OpenAI-compatible
server (real HTTP, real ``openai`` client, real parsing) answering every
planner with twenty distinct plans and every executor with a distinct kernel;
the GPU activities are the doubles on two GPU worker processes.  The dev
server suggests continue-as-new after 40 history events, so the campaign
continues as new between targets and every SearchKernel after every
iteration.  Afterwards: every candidate executed and gated exactly once,
every iteration of every target present in the audit, the state carried
across each boundary (with the decisions and ledger pages it moved to the
store) is a prefix-preserving extension of the one before and stays bounded,
and token/dollar budgets equal what the LLM server billed.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections import Counter, defaultdict
from pathlib import Path

import pytest

from activities.report_activities import expand_pages
from kernelopt.audit import load_report
from kernelopt.audit.collect import build_report
from kernelopt.audit.history import iter_payloads, parse_run
from kernelopt.audit.runs import campaign_histories
from kernelopt.client import connect
from kernelopt.contracts import (
    Budgets,
    CampaignOptions,
    SearchKernelInput,
    SearchLogPage,
    SearchParams,
    names,
)
from kernelopt.contracts.search import SearchState
from kernelopt.store import open_store
from tests.durability import llm_script
from tests.durability.support import DevServer, double_workers, export_of, outcome_of, submit
from tests.support.temporal import make_settings
from workflows.search_kernel import ARCHIVE_PAGE_ITEMS, TREE_KEEP

ITERATIONS, PLANS, BEAM = 5, 20, 4  # 20 + 4 x 80 = 340 candidates per target, 3 targets
CAN_AFTER_EVENTS = 40


@pytest.mark.slow
async def test_a_thousand_candidates_across_continue_as_new(tmp_path: Path) -> None:
    settings = make_settings(tmp_path / "home")
    server = DevServer(
        settings, {"limit.historyCount.suggestContinueAsNew": CAN_AFTER_EVENTS}
    ).start()
    try:
        with double_workers(settings, tmp_path / "logs", "0", gpus=2) as (cpu_q, gpu_q):
            client = await connect(settings, start_embedded=False)
            with llm_script.scripted_llm() as llm:
                opts = CampaignOptions(
                    search=SearchParams(iterations=ITERATIONS, plans=PLANS, retries=0, beam=BEAM),
                    proposer=llm_script.proposer(llm),
                    budgets=Budgets(max_tokens=10_000_000, max_usd=100.0),
                    cpu_queue=cpu_q,
                    gpu_queue=gpu_q,
                    search_library_dominated=True,
                )
                started = time.monotonic()
                handle = await submit(client, settings, opts)
                outcome = await asyncio.wait_for(outcome_of(client, handle.id), 300)
                took = time.monotonic() - started
                requests = list(llm.requests)
            store = open_store(settings.artifacts_dir)
            runs = await campaign_histories(client, handle.id)
            report = build_report(handle.id, runs, "live")
            exported = await asyncio.wait_for(export_of(client, handle.id, cpu_q), 120)
            archived = await load_report(None, handle.id, store)
    finally:
        server.stop()

    tried = outcome.candidates_tried
    print(f"\n{tried} candidates in {took:.1f} s, {len(report.runs)} runs")
    assert tried >= 1000

    # every candidate was written once (one executor call each, retries=0) and gated once
    executor_calls = [r for r in requests if "Write the complete replacement module" in r.text]
    assert len(executor_calls) == tried
    ids = [c.id for c in report.candidates]
    assert len(ids) == len(set(ids)) == tried
    assert report.ok, [c for c in report.checks if not c.ok]

    # the boundaries really happened: the campaign and every search continued as new
    types = Counter(r.workflow_type for r in report.runs)
    assert types["OptimizeModel"] >= 2
    per_search = Counter(r.workflow_id for r in report.runs if r.workflow_type == "SearchKernel")
    assert len(per_search) == len(report.targets) == 3
    assert min(per_search.values()) >= 3

    # nothing lost at a boundary: every iteration of every target has its candidates
    by_target: dict[str, set[int]] = defaultdict(set)
    for c in report.candidates:
        by_target[c.target_id].add(c.iteration)
    assert all(its == set(range(ITERATIONS)) for its in by_target.values()), by_target

    # the state carried across each boundary extends the one before it, never rewrites it
    chains: dict[str, list] = defaultdict(list)
    for run, history in runs:
        if run.workflow_type == "SearchKernel":
            chains[run.workflow_id].append(parse_run(history, run.run_id))
    # (decisions and ledger entries paged out to the store count as carried: the archive
    # activity's input holds them whole)
    largest_state = largest_tree = 0
    pruned = False
    for chain in chains.values():
        inputs = [SearchKernelInput.model_validate(p.input) for p in chain]
        assert inputs[0].state is None
        carried = [SearchState.model_validate(i.state) for i in inputs[1:]]
        seen = []
        for k, state in enumerate(carried):
            pages = [
                SearchLogPage.model_validate(call.input)
                for run in chain[: k + 1]
                for call in run.activities_named(names.ARCHIVE_SEARCH_LOG)
            ]
            # index pages fold the page list; expanded, the carried refs are the data pages
            data_pages = [p for p in pages if not p.pages]
            assert expand_pages(store, state.log_pages) == data_pages
            decisions = [d for p in pages for d in p.decisions] + state.decisions
            ledger = [e for p in pages for e in p.ledger] + state.ledger
            assert state.budget_left == inputs[0].budget_left  # allowances are not re-derived
            assert state.candidates_tried == sum(1 for d in decisions if not d.retime)
            assert state.usage.total_tokens == sum(
                e.prompt_tokens + e.completion_tokens for e in ledger
            )
            # what crosses the boundary is bounded: the rest is paged out to the store
            assert len(state.decisions) + len(state.ledger) < ARCHIVE_PAGE_ITEMS
            # and so is the tree: pruned past 2 x TREE_KEEP states, with what rides along
            tree_ids = {n["id"] for n in state.tree["nodes"]}
            assert len(tree_ids) - 1 <= 2 * TREE_KEEP * ITERATIONS
            assert set(state.candidates) <= tree_ids and set(state.sources) <= tree_ids
            largest_tree = max(largest_tree, len(tree_ids))
            pruned = pruned or bool(state.tree.get("pruned_sources"))
            largest_state = max(largest_state, len(inputs[k + 1].model_dump_json()))
            seen.append((state.iteration, decisions, ledger))
        for (it0, dec0, led0), (it1, dec1, led1) in itertools.pairwise(seen):
            assert it1 == it0 + 1
            assert dec1[: len(dec0)] == dec0
            assert led1[: len(led0)] == led0
            assert len(dec1) > len(dec0)
        assert SearchState.model_validate(inputs[-1].state).log_pages  # paging happened
    print(f"largest carried search state: {largest_state / 1024:.0f} KiB, tree {largest_tree}")
    assert pruned  # 340 candidates per target: the tree was pruned at some boundary

    # budgets: exactly what the LLM server billed, across every boundary
    per_call = llm_script.PROMPT_TOKENS + llm_script.COMPLETION_TOKENS
    assert outcome.used.tokens == per_call * len(requests)
    usd = (
        llm_script.PROMPT_TOKENS * llm_script.USD_PER_MTOK_IN
        + llm_script.COMPLETION_TOKENS * llm_script.USD_PER_MTOK_OUT
    ) / 1e6
    assert outcome.used.usd == pytest.approx(usd * len(requests))
    assert outcome.used.tokens < opts.budgets.max_tokens

    # payloads stay under Temporal's 2 MiB limit even with every decision carried
    biggest = max(
        p.ByteSize() for _, history in runs for e in history.events for p in iter_payloads(e)
    )
    print(f"largest payload {biggest / 1e6:.2f} MB")
    assert biggest < 2 * 1024 * 1024

    # the audit trail survives export: the same audit from the artifact store alone
    assert exported.runs == len(report.runs) and exported.missing == 0
    assert archived.model_dump(exclude={"source"}) == report.model_dump(exclude={"source"})
