"""Record the replay corpus: ``python -m tests.durability.record_histories [--out DIR]``.

Runs real campaigns -- real workflows and CPU activities, GPU activity
doubles, the scripted OpenAI-compatible server for the LLM path -- against
fresh dev servers, and writes every run's history (the campaign's runs,
each SearchKernel's runs, the ExportCampaign run) as Temporal's JSON into
``tests/histories/`` (gzipped, ``*.json.gz``; plain ``*.json`` from elsewhere,
e.g. ``temporal workflow show --output json``, replays too) with an
``INDEX.json`` that says what each file is.
``tests/durability/test_replay.py`` replays them all in CI, so a workflow
change that would break a running 66-hour campaign fails there first.

Re-record only deliberately (a new workflow feature worth covering): the
point of the corpus is that histories recorded by OLD code keep replaying.
Scenarios: a built-in campaign that is optimized (and its export, started by
the test: recorded before campaigns exported themselves); one that exports
itself as it closes; one that
is cancelled mid-search; one paused, resumed and given a new budget; an LLM
campaign with retry-fix; an LLM campaign that continues as new (the
campaign between targets, every search between iterations); and an LLM
campaign whose gates charge their reported run time; one long search
whose tree is pruned; and one whose best winner fails the model gates and
whose runner-up is verified instead; a built-in campaign whose last round re-times only
the candidates that can still win; one long search with bounded pages and tree; a built-in
campaign that carries its segmentation by reference across a continue-as-new; one that
carries its triage and search plan by reference too.
"""

from __future__ import annotations

import argparse
import asyncio
import gzip
import json
import subprocess
import sys
import tempfile
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path

from temporalio.client import Client

from kernelopt.audit.runs import campaign_histories
from kernelopt.client import connect
from kernelopt.contracts import Budgets, CampaignOptions, CampaignPhase, SearchParams
from tests.durability import llm_script
from tests.durability.support import (
    ROOT,
    DevServer,
    double_workers,
    export_of,
    options,
    outcome_of,
    progress,
    submit,
    wait_for_phase,
    wait_until,
)
from tests.support.temporal import make_settings
from workflows.export_campaign import export_workflow_id

DEFAULT_OUT = ROOT / "tests" / "histories"

Scenario = Callable[[Client, object, str, str], Awaitable[list[str]]]


async def optimized(client, settings, cpu_q, gpu_q) -> list[str]:
    handle = await submit(client, settings, options(cpu_q, gpu_q), "rec-optimized")
    await outcome_of(client, handle.id)
    await export_of(client, handle.id, cpu_q)
    return [handle.id, export_workflow_id(handle.id)]


async def exporting(client, settings, cpu_q, gpu_q) -> list[str]:
    """A campaign that starts its own ExportCampaign as it closes (recorded after that landed)."""
    handle = await submit(client, settings, options(cpu_q, gpu_q), "rec-exporting")
    await outcome_of(client, handle.id)
    index = await export_of(client, handle.id, cpu_q)
    if index.runs < 2:
        raise RuntimeError("the export did not find the campaign's runs")
    return [handle.id, export_workflow_id(handle.id)]


async def cancelled(client, settings, cpu_q, gpu_q) -> list[str]:
    handle = await submit(client, settings, options(cpu_q, gpu_q), "rec-cancelled")
    await wait_for_phase(handle, CampaignPhase.SEARCHING)
    await handle.signal("stop", "cancelled by user")
    await outcome_of(client, handle.id)
    return [handle.id]


async def steered(client, settings, cpu_q, gpu_q) -> list[str]:
    opts = options(cpu_q, gpu_q, budgets=Budgets(max_usd=5.0))
    handle = await submit(client, settings, opts, "rec-steered")
    await wait_for_phase(handle, CampaignPhase.SEARCHING)
    await handle.signal("pause")

    async def held() -> bool:
        return (await progress(handle)).message == "paused"

    await wait_until(held, 60)
    await handle.execute_update("set_budgets", Budgets(max_usd=5.0, max_gpu_seconds=3600.0))
    await handle.signal("resume")
    await outcome_of(client, handle.id)
    return [handle.id]


def _llm_options(llm, cpu_q, gpu_q, iterations: int, plans: int, retries: int) -> CampaignOptions:
    return CampaignOptions(
        search=SearchParams(iterations=iterations, plans=plans, retries=retries, beam=2),
        proposer=llm_script.proposer(llm),
        budgets=Budgets(max_tokens=1_000_000),
        cpu_queue=cpu_q,
        gpu_queue=gpu_q,
        search_library_dominated=True,
    )


async def _llm_campaign(
    client, settings, cpu_q: str, gpu_q: str, workflow_id: str, **search: int
) -> list[str]:
    """One campaign with the scripted LLM; ``search``: iterations, plans, retries, max_targets."""
    max_targets = search.pop("max_targets", None)
    with llm_script.scripted_llm() as llm:
        opts = _llm_options(llm, cpu_q, gpu_q, **search)
        opts = opts.model_copy(update={"max_targets": max_targets})
        handle = await submit(client, settings, opts, workflow_id)
        await outcome_of(client, handle.id)
    return [handle.id]


async def llm_retry_fix(client, settings, cpu_q, gpu_q) -> list[str]:
    return await _llm_campaign(
        client, settings, cpu_q, gpu_q, "rec-llm", iterations=2, plans=2, retries=2
    )


async def continued_as_new(client, settings, cpu_q, gpu_q) -> list[str]:
    return await _llm_campaign(
        client, settings, cpu_q, gpu_q, "rec-continue-as-new", iterations=3, plans=2, retries=0
    )


async def charged(client, settings, cpu_q, gpu_q) -> list[str]:
    """An LLM campaign whose gate activities report their run time (``device_seconds``):
    recorded after budgets began charging it (patch ``charge-gate-run-time``)."""
    return await _llm_campaign(
        client, settings, cpu_q, gpu_q, "rec-charged", iterations=2, plans=2, retries=1
    )


async def pruned(client, settings, cpu_q, gpu_q) -> list[str]:
    """One long search (20 + 5 x 40 candidates) whose tree outgrows 2 x TREE_KEEP states:
    recorded after the tree began to be pruned (patch ``prune-search-tree``)."""
    return await _llm_campaign(
        client,
        settings,
        cpu_q,
        gpu_q,
        "rec-pruned",
        iterations=6,
        plans=20,
        retries=0,
        max_targets=1,
    )


async def second_chance(client, settings, cpu_q, gpu_q) -> list[str]:
    """One target whose best winner fails V_model (the GPU worker's double fails the first
    re-stitched model), so its runner-up is verified instead: recorded after the patches
    ``search-runners-up`` and ``model-gates-try-runners-up``."""
    opts = options(cpu_q, gpu_q).model_copy(update={"max_targets": 1})
    handle = await submit(client, settings, opts, "rec-second-chance")
    outcome = await outcome_of(client, handle.id)
    if [v.status.value for v in outcome.model_verdicts] != ["fail", "pass"]:
        raise RuntimeError(f"no second chance was recorded: {outcome.model_verdicts}")
    return [handle.id]


async def last_round(client, settings, cpu_q, gpu_q) -> list[str]:
    """A built-in campaign whose last round re-times only candidates faster than the root:
    recorded after the patch ``retime-last-round-winners-only``."""
    opts = options(cpu_q, gpu_q, iterations=2, plans=4, beam=4)
    handle = await submit(client, settings, opts, "rec-last-round")
    await outcome_of(client, handle.id)
    return [handle.id]


def _gpu_worker_env(scenario: str, scratch: Path) -> dict[str, str]:
    """What a scenario's GPU worker doubles do differently (most: nothing)."""
    if scenario == "second_chance":
        return {"KERNELOPT_DOUBLES_MODEL_GATE": f"fail-once:{scratch / 'model-gate-failed'}"}
    return {}


async def by_reference(client, settings, cpu_q, gpu_q) -> list[str]:
    """A built-in campaign that carries its segmentation by reference and continues as new
    between targets (the next run reuses the chosen targets): recorded after the patch
    ``segmentation-by-reference``."""
    handle = await submit(client, settings, options(cpu_q, gpu_q), "rec-by-reference")
    await outcome_of(client, handle.id)
    return [handle.id]


async def triage_by_reference(client, settings, cpu_q, gpu_q) -> list[str]:
    """A built-in campaign that carries triage by reference too (a ``TriageRef`` and a stored
    plan, one target handed out at a time) and continues as new between targets: recorded
    after the patch ``triage-by-reference``."""
    handle = await submit(client, settings, options(cpu_q, gpu_q), "rec-triage-by-reference")
    await outcome_of(client, handle.id)
    return [handle.id]


async def scope_by_reference(client, settings, cpu_q, gpu_q) -> list[str]:
    """A built-in campaign whose searches get their target's scope by reference (a
    ``ScopeRef`` in the search's and its activities' inputs, the scope in the store) and
    that continues as new between targets: recorded after the patch ``scope-by-reference``."""
    handle = await submit(client, settings, options(cpu_q, gpu_q), "rec-scope-by-reference")
    await outcome_of(client, handle.id)
    return [handle.id]


# (scenario, dynamic config of its server)
async def bounded(client, settings, cpu_q, gpu_q) -> list[str]:
    """One long search (12 x 60 candidates) after issue 25's bounded carried state: pages cut
    by size and folded into index pages, the tree kept to 32 + 32 states (patches
    ``archive-pages-bounded``, ``bounded-search-tree``)."""
    return await _llm_campaign(
        client,
        settings,
        cpu_q,
        gpu_q,
        "rec-bounded",
        iterations=12,
        plans=30,
        retries=0,
        max_targets=1,
    )


SCENARIOS: list[tuple[str, Scenario, dict]] = [
    ("optimized", optimized, {}),
    ("exporting", exporting, {}),
    ("cancelled", cancelled, {}),
    ("steered", steered, {}),
    ("llm", llm_retry_fix, {}),
    ("continue_as_new", continued_as_new, {"limit.historyCount.suggestContinueAsNew": 40}),
    ("charged", charged, {}),
    ("pruned", pruned, {}),
    ("second_chance", second_chance, {}),
    ("last_round", last_round, {}),
    ("bounded", bounded, {}),
    ("by_reference", by_reference, {"limit.historyCount.suggestContinueAsNew": 30}),
    (
        "triage_by_reference",
        triage_by_reference,
        {"limit.historyCount.suggestContinueAsNew": 30},
    ),
    (
        "scope_by_reference",
        scope_by_reference,
        {"limit.historyCount.suggestContinueAsNew": 30},
    ),
]


async def record(out: Path, only: list[str] | None = None) -> list[dict]:
    out.mkdir(parents=True, exist_ok=True)
    index: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="kernelopt-record-") as tmp:
        for name, scenario, dynamic in SCENARIOS:
            if only and name not in only:
                continue
            settings = make_settings(Path(tmp) / name)
            server = DevServer(settings, dynamic).start()
            logs = Path(tmp) / name / "logs"
            gpu_env = _gpu_worker_env(name, Path(tmp) / name)
            try:
                with double_workers(settings, logs, "0.1", **gpu_env) as (cpu_q, gpu_q):
                    client = await connect(settings, start_embedded=False)
                    ids = await asyncio.wait_for(scenario(client, settings, cpu_q, gpu_q), 300)
                    index += await _write(client, name, ids, out)
            finally:
                server.stop()
    return index


async def _write(client: Client, scenario: str, workflow_ids: list[str], out: Path) -> list[dict]:
    rows = []
    runs = []
    for workflow_id in workflow_ids:
        runs += await campaign_histories(client, workflow_id)
    for n, (run, history) in enumerate(runs):
        name = f"{scenario}.{n:02d}.{run.workflow_type}.json.gz"
        # Temporal's history JSON, compact and gzipped (payloads are base64: ~8x smaller)
        text = json.dumps(json.loads(history.to_json()), separators=(",", ":"))
        (out / name).write_bytes(gzip.compress(text.encode(), mtime=0))
        rows.append(
            {
                "file": name,
                "scenario": scenario,
                "workflow_id": run.workflow_id,
                "run_id": run.run_id,
                "workflow_type": run.workflow_type,
                "status": run.status,
                "events": len(history.events),
            }
        )
    return rows


def _commit() -> str:
    done = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
    )
    return done.stdout.strip()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--only", nargs="*", default=None, help="scenario names")
    args = parser.parse_args(argv)
    for old in [*args.out.glob("*.json"), *args.out.glob("*.json.gz")]:
        if old.name != "INDEX.json" and (args.only is None or old.name.split(".")[0] in args.only):
            old.unlink()
    rows = asyncio.run(record(args.out, args.only))
    stamp = {"recorded_at": datetime.now(UTC).isoformat(timespec="seconds"), "commit": _commit()}
    rows = [{**row, **stamp} for row in rows]  # with --only, older rows keep their own
    index_path = args.out / "INDEX.json"
    previous = []
    if args.only and index_path.is_file():
        previous = [
            r
            for r in json.loads(index_path.read_text())["histories"]
            if r["scenario"] not in args.only
        ]
    index = {
        "recorded_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "commit": _commit(),
        "how": "python -m tests.durability.record_histories",
        "histories": previous + rows,
    }
    index_path.write_text(json.dumps(index, indent=1) + "\n")
    sys.stdout.write(f"{len(rows)} histories written to {args.out}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
