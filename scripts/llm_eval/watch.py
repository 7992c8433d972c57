"""What each campaign is doing, watched until every one has finished or waits for replies."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import timedelta

from temporalio.client import Client, WorkflowExecutionStatus, WorkflowQueryFailedError
from temporalio.service import RPCError

from kernelopt.agents import reply_folder
from kernelopt.agents.deferred import LLM_POLL
from kernelopt.config import Settings
from kernelopt.contracts import CampaignProgress, Outcome, names
from scripts.llm_eval.packing import Snapshotter
from scripts.llm_eval.record import EvalManifest, EvalProblem
from scripts.llm_eval.services import Site
from scripts.llm_eval.stream import Stream, now

POLL_S = 3.0  # between looks at the campaigns
QUIET_S = 8.0  # a settled picture must hold this long (longer than a search's 2 s settle)
GPU_ACTIVITIES = frozenset(names.GPU_ACTIVITIES)
SETTLED = "every campaign has finished or waits for replies (or a GPU worker)"


@dataclass
class Look:
    """One campaign at one moment."""

    campaign_id: str
    problem: str
    state: str  # finished / waiting / running / failed / terminated / ...
    detail: str = ""
    requests: list[str] = field(default_factory=list)  # waiting request ids, no reply yet
    roles: dict[str, int] = field(default_factory=dict)
    progress: CampaignProgress | None = None
    outcome: Outcome | None = None

    @property
    def settled(self) -> bool:
        """Nothing will happen until replies (or a GPU worker) arrive, or it is over."""
        return self.state != "running"

    @property
    def key(self) -> tuple:
        return (self.campaign_id, self.state, self.detail, tuple(sorted(self.requests)))


def requests_by_campaign(folder: reply_folder.Folders) -> tuple[dict[str, list], set[str]]:
    """Waiting request documents per campaign, and the campaigns with a reply not yet collected."""
    waiting: dict[str, list] = {}
    delivered: set[str] = set()
    if not folder.requests.is_dir():
        return waiting, delivered
    for path in folder.requests.glob("*.json"):
        try:
            doc = json.loads(path.read_text())
        except (OSError, ValueError):
            continue  # being written (atomic rename) or removed meanwhile
        cid = doc.get("campaign_id", "")
        if reply_folder.find_reply(folder, doc.get("request_id", path.stem)) is None:
            waiting.setdefault(cid, []).append(doc)
        else:
            delivered.add(cid)
    return waiting, delivered


async def look_at(
    client: Client,
    problem: EvalProblem,
    folder: tuple[dict[str, list], set[str]],
    gpu_served: bool,
    known: dict[str, Outcome],
) -> Look:
    from kernelopt.audit.waiting import pending_work
    from workflows.export_campaign import export_workflow_id

    cid = problem.campaign_id
    handle = client.get_workflow_handle(cid, result_type=Outcome)
    desc = await handle.describe()
    if desc.status != WorkflowExecutionStatus.RUNNING:
        if desc.status != WorkflowExecutionStatus.COMPLETED:
            return Look(cid, problem.name, desc.status.name.lower())
        if cid not in known:
            known[cid] = await handle.result()
        look = Look(cid, problem.name, "finished", outcome=known[cid])
        try:  # its history export runs on after it (the audit outlives the server)
            export = await client.get_workflow_handle(export_workflow_id(cid)).describe()
        except RPCError:
            return look
        if export.status == WorkflowExecutionStatus.RUNNING:
            look.state, look.detail = "running", "exporting its history"
        return look
    progress = None
    with contextlib.suppress(RPCError, WorkflowQueryFailedError, TimeoutError):
        progress = await handle.query(
            "progress", result_type=CampaignProgress, rpc_timeout=timedelta(seconds=5)
        )
    pending = await pending_work(client, cid)
    waiting_docs, delivered = folder
    docs = waiting_docs.get(cid, [])
    gpu_waits = [
        p.activity
        for p in pending
        if p.activity in GPU_ACTIVITIES and p.state == "scheduled" and not gpu_served
    ]
    busy = [p.activity for p in pending if p.activity != LLM_POLL and p.activity not in gpu_waits]
    roles = Counter(d.get("role", "?") for d in docs)
    look = Look(cid, problem.name, "running", progress=progress, roles=dict(roles))
    look.requests = [d.get("request_id", "") for d in docs]
    if busy:
        look.detail = ", ".join(sorted(set(busy)))
    elif cid in delivered:
        look.detail = "collecting replies"
    elif docs or gpu_waits:
        look.state = "waiting"
        parts = [f"{n} {r}" for r, n in sorted(roles.items())]
        if gpu_waits:
            parts.append(f"a GPU worker ({', '.join(sorted(set(gpu_waits)))})")
        look.detail = "for " + ", ".join(parts)
    else:
        look.detail = "between steps"
    return look


async def look_all(
    client: Client,
    problems: list[EvalProblem],
    settings: Settings,
    gpu_queue: str,
    known: dict[str, Outcome],
    gpu_workers: bool,
) -> list[Look]:
    """Every campaign now; GPU work counts as served while our GPU workers run or any polls."""
    from kernelopt.follow import has_pollers

    folder = requests_by_campaign(reply_folder.folders(settings.llm_dir))
    gpu_served = gpu_workers or await has_pollers(client, gpu_queue)
    return [await look_at(client, p, folder, gpu_served, known) for p in problems]


def live_table(looks: list[Look], stream: Stream, header: str) -> str:
    lines = [
        f"# llm_eval: {header}",
        "",
        f"{now()}, {stream.elapsed:.0f} s into this call",
        "",
        "| problem | campaign | state | phase | tried | passed 1-2 | best | GPU-s | tokens | detail |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for look in looks:
        p, o = look.progress, look.outcome
        if o is not None:
            cells = [
                "done",
                str(o.candidates_tried),
                str(o.candidates_accepted),
                f"{o.category.value} {o.speedup:.3f}x",
                f"{o.used.gpu_seconds:.0f}",
                str(o.used.tokens),
            ]
        elif p is not None:
            cells = [
                p.phase.value,
                str(p.candidates_tried),
                str(p.candidates_accepted),
                "-" if p.best_speedup is None else f"{p.best_speedup:.3f}x",
                f"{p.used.gpu_seconds:.0f}",
                str(p.used.tokens),
            ]
        else:
            cells = ["-"] * 6
        row = [look.problem, look.campaign_id, look.state, *cells, look.detail or "-"]
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines) + "\n"


async def run_until_settled(
    client: Client,
    manifest: EvalManifest,
    settings: Settings,
    gpu_queue: str,
    stream: Stream,
    deadline: float,
    stop: asyncio.Event,
    snapshot: Snapshotter,
    site: Site,
) -> tuple[str, list[Look]]:
    """Watch the campaigns until each is settled for QUIET_S, the deadline, or a signal."""
    known: dict[str, Outcome] = {}
    problems = manifest.campaigns()
    last_key: tuple | None = None
    quiet_since = 0.0
    last_states: dict[str, str] = {}
    looks: list[Look] = []
    while True:
        try:
            looks = await look_all(client, problems, settings, gpu_queue, known, site.serves_gpu)
        except RPCError as exc:  # the server hiccuped: look again, the deadline still holds
            stream.event("look_failed", error=str(exc)[:300])
            looks = []
        for look in looks:
            text = f"{look.state}: {look.detail}" if look.detail else look.state
            if last_states.get(look.campaign_id) != text:
                last_states[look.campaign_id] = text
                stream.event("campaign", id=look.campaign_id, state=look.state, detail=look.detail)
        stream.table(live_table(looks, stream, "live"))
        now = time.monotonic()
        key = tuple(look.key for look in looks)
        if looks and all(look.settled for look in looks):
            if key != last_key:
                last_key, quiet_since = key, now
            elif now - quiet_since >= QUIET_S:
                return SETTLED, looks
        else:
            last_key = None
        if now >= deadline:
            return "time budget reached", looks
        if stop.is_set():
            return "stopped by a signal", looks
        await snapshot.maybe(now)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), timeout=min(POLL_S, max(0.1, deadline - now)))
