"""GPU work runs once, even when Temporal loses the completion of a finished activity.

The real dev server is SIGKILLed just before a gate_candidate double finishes
and kept down past the GPU heartbeat timeout (3 s in these workers): the
worker's completion meets no server, the server times the attempt out when it
comes back, and schedules attempt 2 (the "activity not found on completion"
case of issue 25).  The GPU worker stored the finished result before reporting
it (``activities.idempotent``), so attempt 2 must return it without running
the double again.  Physical executions are counted from the doubles' own log
(one record each time a double's work actually finished).  Outages stop at the
first one whose lost attempt the server retried; one whose attempt completed anyway is
over as soon as the history shows it; up to three are tried per campaign,
and a second campaign runs when all of them miss, since an outage can miss (the
completion may still reach the server, or no gate is left).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections import Counter
from pathlib import Path

from temporalio.client import Client, WorkflowHandle

from kernelopt.audit import load_report
from kernelopt.audit.model import AuditReport
from kernelopt.client import connect
from kernelopt.contracts import Outcome
from kernelopt.store import open_store
from tests.durability.support import (
    DevServer,
    Worker,
    assert_sound,
    options,
    outcome_of,
    queues,
    submit,
    wait_until,
)
from tests.support.temporal import make_settings

GATE_S = 1.0  # 20 heartbeating steps of 50 ms; the kill lands in the last two
DOWN_S = 6.0  # longer than the 3-s heartbeat timeout: the attempt is lost meanwhile
MAX_OUTAGES = 3  # per campaign
CAMPAIGNS = 2  # an outage can miss on a loaded machine; a second campaign gives more gates
RETRY_SEEN_S = 30.0  # after the restart: heartbeat timeout, retry backoff, pollers reconnecting


def records(path: Path) -> list[dict]:
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def retried_gates(report: AuditReport) -> set[str]:
    """gate_candidate calls that needed more than one attempt."""
    return {
        i.activity_id for i in report.incidents if i.activity == "gate_candidate" and i.attempts > 1
    }


async def first_attempt_completed(client: Client, workflow_id: str, activity_id: str) -> bool:
    """The activity's first attempt completed on the server: an outage that missed.

    A retried activity's started event is written when it closes, with its attempt, so
    a completion with attempt 1 means the worker's report got through.
    """
    scheduled, started = None, {}
    async for event in client.get_workflow_handle(workflow_id).fetch_history_events():
        kind = event.WhichOneof("attributes")
        if kind == "activity_task_scheduled_event_attributes":
            if event.activity_task_scheduled_event_attributes.activity_id == activity_id:
                scheduled = event.event_id
        elif kind == "activity_task_started_event_attributes":
            attrs = event.activity_task_started_event_attributes
            started[event.event_id] = (attrs.scheduled_event_id, attrs.attempt)
        elif kind == "activity_task_completed_event_attributes" and scheduled is not None:
            attrs = event.activity_task_completed_event_attributes
            if started.get(attrs.started_event_id) == (scheduled, 1):
                return True
    return False


def call_id(record: dict) -> tuple[str, str]:
    """A GPU call: its campaign's workflow and its key (a second campaign of the same
    problem repeats the keys)."""
    return record["workflow"], record["key"]


def executions(log: Path) -> Counter:
    """Finished physical executions per (activity, workflow, key)."""
    return Counter((r["activity"], *call_id(r)) for r in records(log))


async def test_gpu_result_survives_a_server_outage_at_completion(reference, tmp_path: Path) -> None:
    settings = make_settings(tmp_path / "home")
    server = DevServer(settings).start()
    store = open_store(settings.artifacts_dir)
    done_log, steps_log = tmp_path / "done.jsonl", tmp_path / "steps.jsonl"
    env = {
        "KERNELOPT_DOUBLES_DELAY": "0.05",
        "KERNELOPT_DOUBLES_SLOW": f"gate_candidate={GATE_S}",
        "KERNELOPT_DOUBLES_LOG": str(done_log),
        "KERNELOPT_DOUBLES_PROGRESS": str(steps_log),
    }
    cpu_q, gpu_q = queues()
    cpu = Worker(settings, "cpu", cpu_q, tmp_path)
    gpu = Worker(settings, "gpu", gpu_q, tmp_path, **env)
    lost: list[tuple[str, str]] = []  # gate calls whose first attempt finished while it was down

    async def outages_until_retried(handle: WorkflowHandle) -> bool:
        """Kill the server as a gate finishes, until the server retried a lost attempt."""
        for _ in range(MAX_OUTAGES):
            finished = {call_id(r) for r in records(done_log)}

            def finishing(seen=frozenset(finished)) -> tuple[str, str] | None:
                for r in records(steps_log):
                    if (
                        r["activity"] == "gate_candidate"
                        and r["step"] >= r["steps"] - 2
                        and call_id(r) not in seen
                        and r["attempt"] == 1
                    ):
                        return call_id(r)
                return None

            try:
                await wait_until(finishing, 60, every=0.02, what="a gate_candidate finishing")
            except TimeoutError:
                return False  # no gate work left in this campaign
            key = finishing()
            server.kill9()
            await wait_until(lambda k=key: k in {call_id(r) for r in records(done_log)}, 10)
            await asyncio.sleep(DOWN_S)
            server.start()
            lost.append(key)
            fresh = await connect(settings, start_embedded=False)

            done = next(r for r in records(done_log) if call_id(r) == key)

            async def settled(c: Client = fresh, r: dict = done) -> bool:
                return bool(retried_gates(await load_report(c, handle.id, store))) or (
                    await first_attempt_completed(c, r["workflow"], r["activity_id"])
                )

            with contextlib.suppress(TimeoutError):
                await wait_until(settled, RETRY_SEEN_S, every=0.5, what="a retried gate")
            if retried_gates(await load_report(fresh, handle.id, store)):
                return True
            # this outage missed (its completion reached the server): try another
        return False

    try:
        cpu.wait_ready(), gpu.wait_ready()
        for _ in range(CAMPAIGNS):  # a campaign whose outages all missed: run another
            handle = await submit(
                await connect(settings, start_embedded=False), settings, options(cpu_q, gpu_q)
            )
            if await outages_until_retried(handle):
                break
            client = await connect(settings, start_embedded=False)
            await asyncio.wait_for(outcome_of(client, handle.id), 180)
        client2 = await connect(settings, start_embedded=False)
        outcome = await asyncio.wait_for(
            client2.get_workflow_handle(handle.id, result_type=Outcome).result(), 180
        )
        await assert_sound(client2, settings, handle.id, reference)
        report = await load_report(client2, handle.id, store)
    finally:
        cpu.stop()
        gpu.stop()
        server.stop()

    retried = retried_gates(report)
    counts = executions(done_log)
    print(
        f"outages {len(lost)}, gate calls retried after one {len(retried)}, "
        f"physical executions {sum(counts.values())} for {len(counts)} distinct calls"
    )
    assert lost, "no outage hit a finishing gate_candidate"
    assert retried, "no attempt was lost to the outage: the scenario did not happen"
    doubled = {k: n for k, n in counts.items() if n > 1}
    assert not doubled, f"GPU work ran again after its result was stored: {doubled}"
    assert outcome.category == reference.outcome.category
