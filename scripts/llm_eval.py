"""Real-model evaluation in reply-folder mode, one short device call per reply round (issue 24, 3).

    source scripts/device_env.sh; source scripts/device_bwrap.sh
    export KERNELOPT_HOME=$(mktemp -d /tmp/eval-home-XXXX)
    python3 scripts/llm_eval.py start --problems P1.py P2.py ... --rounds 2 [--budget-s 450]
    python3 scripts/llm_eval.py resume --home home.tgz --replies DIR_OR_TGZ [--budget-s 450]
    python3 scripts/llm_eval.py report --home home.tgz --out DIR

Each LLM request of a folder-mode campaign is a self-contained file that an
independent model answers out of band, so an evaluation is a chain of short
calls on a machine that is gone between them.  One call:

1. ``start``: submits one campaign per problem (the CLI's own option building
   and ``kernelopt.campaigns``, with ``KERNELOPT_LLM_MODE=folder``);
   ``resume``: restores ``KERNELOPT_HOME`` from the previous call's
   ``home.tgz`` (``kernelopt state import``), draws again the tensors the
   last pack left behind (below), and delivers every reply file of
   ``--replies`` through ``kernelopt reply``'s own code (file written, search
   signalled); a file naming no waiting request is skipped and said so;
2. starts the embedded Temporal server and the local workers (the ones
   ``kernelopt optimize`` starts: a CPU worker, one GPU worker per GPU), plus
   any ``--extra-worker`` command (tests: a GPU stand-in), and waits until
   they poll;
3. lets the campaigns run until each one has finished or waits only for
   replies (or, with no GPU worker of ours or anyone's polling, for a GPU),
   the same for QUIET_S, or ``--budget-s`` is reached, or SIGTERM / SIGINT;
4. stops workers and server cleanly and packs ``KERNELOPT_HOME`` with
   ``kernelopt state export`` (server database, artifact store, result index,
   reply folder; logs, pid files and compiler caches stay behind) into
   ``$OUT/home.tgz``, the requests still waiting into ``$OUT/requests.tgz``
   (one ``ID.json`` each: answer it as ``ID.txt`` in the next call's replies).

**Thin homes.**  A device call carries 64 MiB in all (the tree, ``.whl`` and
``.device`` take ~57) and brings back files of at most 16 MiB, but a
problem's captured tensors are 20-600 MiB.  So ``home.tgz`` leaves behind
(``export_state(leave_out=...)``, listed in its manifest and in
``refs/llm-eval/left_out.json``): each compile's args, inputs and init inputs,
once this machine has drawn them again from the problem's seed to the very
digests the compile recorded (``kernelopt.compile.rehydrate``; CPU only,
checked once per compile), which ``resume`` draws again before any worker
starts; the compile's reference output and raw Nsight Compute reports, which
no later step reads (restitch compares with the reference only when the store
holds it); and, once every campaign has finished, every tensor archive over
1 MiB.

What comes back (6 files, all under ``--out``, default ``$OUT``):
``progress.jsonl`` (one event per line, flushed as it happens: a call cut at
its time limit still says what it did), ``progress.md`` (the campaigns' table,
rewritten as they move; at the end, the per-problem outcome table),
``home.tgz`` (also written as a live snapshot every ``--snapshot-s``, so a cut
call leaves one to resume from), ``requests.tgz``, ``logs.tgz`` (server and
worker logs, their tails) and ``summary.json`` (why the call stopped, each
campaign's state, the table's rows, the archive's size).

Search settings (``start``; why these): ``--rounds`` is the search's T
(iterations); ``--plans 2`` (N) gives each round two candidates, enough to
compare replies and to let screening rank something; ``--retries 1`` (K) gives
a rejected candidate one fix, which exercises the retry-fix prompt but adds a
reply round only where a candidate failed; ``--beam 1`` re-times only the best
state; ``--max-targets 1`` searches only the first of triage's targets (the
largest share of GPU time): a campaign searches its targets one after another,
each with its own profile and requests.  Per iteration a campaign then needs
3-4 reply rounds (plan; execute; retry-fix where a candidate failed;
summarize), of which only those after execute and retry-fix replies (the
gates) and the last one (re-stitch, gates 3-4) do GPU work.
docs/TEAM_NOTES.md ("Real-model evaluation") has the device command sequence
and the time each round needs.

The evaluation's own record (problems, campaign ids, options, one line per
call) is ``refs/llm-eval/eval.json`` in the artifact store, so it travels in
every ``home.tgz``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import io
import json
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tarfile
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field
from temporalio.client import Client, WorkflowExecutionStatus, WorkflowQueryFailedError
from temporalio.service import RPCError

from kernelopt.agents import reply_folder
from kernelopt.agents.deferred import LLM_POLL
from kernelopt.config import Settings
from kernelopt.contracts import CampaignOptions, CampaignProgress, Outcome, names
from kernelopt.errors import KernelOptError
from kernelopt.store import write_atomic

ROOT = Path(__file__).resolve().parents[1]
MANIFEST = ("refs", "llm-eval", "eval.json")  # under the artifact store: travels with the state
POLL_S = 3.0  # between looks at the campaigns
QUIET_S = 8.0  # a settled picture must hold this long (longer than a search's 2 s settle)
READY_S = 240.0  # workers must poll within this (a GPU worker's zygote takes ~20 s)
WAIT_LIMIT_S = 30 * 86400.0  # an unanswered request ends its search after this (default: a day)
LOG_TAIL_BYTES = 2 << 20  # per log file in logs.tgz
# a device call carries 64 MiB in all, and the tree, .whl and .device take ~57 of them
CARRY_WARN_BYTES = 6 << 20
REPLY_ROLES = ("execute", "retry_fix")  # replies that become candidates
GPU_ACTIVITIES = frozenset(names.GPU_ACTIVITIES)
# one file per running call (its pid): the home whose server and workers it started
LIVE_DIR = Path(tempfile.gettempdir()) / "llm-eval-live"
SETTLED = "every campaign has finished or waits for replies (or a GPU worker)"


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


# --- what goes to $OUT as it happens -----------------------------------------------------------
class Stream:
    """``progress.jsonl`` (append, flushed per event) and ``progress.md`` (rewritten whole)."""

    def __init__(self, out: Path) -> None:
        self.out = out
        out.mkdir(parents=True, exist_ok=True)
        self.started = time.monotonic()
        self._events = (out / "progress.jsonl").open("a", encoding="utf-8")
        self._table = ""
        self.failed = False

    @property
    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def event(self, kind: str, **fields: Any) -> None:
        self.failed = self.failed or kind == "failed"
        record = {"t": round(self.elapsed, 1), "at": _now(), "event": kind, **fields}
        self._events.write(json.dumps(record, default=str) + "\n")
        self._events.flush()
        os.fsync(self._events.fileno())
        detail = " ".join(f"{k}={v}" for k, v in fields.items() if not isinstance(v, list | dict))
        print(f"[{self.elapsed:6.1f}s] {kind} {detail}".rstrip(), flush=True)

    def table(self, text: str) -> None:
        if text != self._table:
            self._table = text
            write_atomic(self.out / "progress.md", text.encode("utf-8"))

    def put(self, name: str, source: Path) -> Path:
        """Copy a finished file into $OUT under ``name`` (replaced whole, never half-written)."""
        target = self.out / name
        partial = self.out / f".{name}.part"
        shutil.copyfile(source, partial)
        os.replace(partial, target)
        return target

    def close(self) -> None:
        self._events.close()


# --- the evaluation's own record -----------------------------------------------------------
class EvalProblem(BaseModel):
    path: str
    name: str
    level: int | None = None
    campaign_id: str = ""
    error: str = ""  # why it was not submitted


class EvalCall(BaseModel):
    command: str
    host: str
    started_at: str
    seconds: float = 0.0
    replies_delivered: int = 0
    replies_skipped: int = 0
    stopped: str = ""
    states: dict[str, str] = Field(default_factory=dict)  # campaign id -> state at the end


class EvalManifest(BaseModel):
    created_at: str
    rounds: int
    options: dict[str, Any]  # the CampaignOptions every campaign was submitted with
    problems: list[EvalProblem] = Field(default_factory=list)
    calls: list[EvalCall] = Field(default_factory=list)

    def campaigns(self) -> list[EvalProblem]:
        return [p for p in self.problems if p.campaign_id]


def manifest_path(settings: Settings) -> Path:
    return settings.artifacts_dir.joinpath(*MANIFEST)


def load_manifest(settings: Settings) -> EvalManifest:
    path = manifest_path(settings)
    if not path.is_file():
        raise KernelOptError(f"{path} is missing: this home holds no llm_eval run")
    return EvalManifest.model_validate_json(path.read_text())


def save_manifest(settings: Settings, manifest: EvalManifest) -> None:
    path = manifest_path(settings)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, manifest.model_dump_json(indent=1).encode("utf-8"))


# --- leftovers of a cut call ------------------------------------------------------------------
def stop_leftovers(stream: Stream) -> None:
    """Stop the server and workers of calls whose harness process is gone.

    They run in sessions of their own, so a call killed at its time limit leaves
    them running on a machine that stays warm ~30 s; the next call there would
    share the GPU with them.  A call still running (its pid alive) is left alone;
    the local workers and the server are found by their pid files (which check the
    command line), an extra worker by its recorded pid and command line.
    """
    from kernelopt.local_workers import stop_local_workers
    from kernelopt.pidfile import process_alive
    from kernelopt.temporal_server import EmbeddedServer

    for path in sorted(LIVE_DIR.glob("*.json")) if LIVE_DIR.is_dir() else []:
        try:
            pid, live = int(path.stem), json.loads(path.read_text())
            home = Path(live["home"])
        except (OSError, ValueError, KeyError):
            continue
        if process_alive(pid):
            continue
        extra = [_stop_extra(p, argv) for p, argv in live.get("extra", [])]
        old = Settings(home=home)
        workers = stop_local_workers(old, wait_s=10)
        server = EmbeddedServer(old).stop()
        path.unlink(missing_ok=True)
        stream.event(
            "leftovers_stopped", home=str(home), workers=workers, extra=extra, server=server
        )


def _stop_extra(pid: int, argv: list[str]) -> bool:
    """SIGTERM (then SIGKILL) the process group of ``pid`` if it still runs ``argv``."""
    from kernelopt.pidfile import process_alive

    try:
        running = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[:-1]
    except OSError:
        return False
    if [a.decode(errors="replace") for a in running] != argv:
        return False  # another process has that pid now
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGTERM)
    deadline = time.monotonic() + 10
    while process_alive(pid) and time.monotonic() < deadline:
        time.sleep(0.2)
    if process_alive(pid):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGKILL)
    return True


def mark_live(settings: Settings, extra: list[subprocess.Popen] = ()) -> Path:
    """This call's home (and extra workers) while it runs: ``stop_leftovers`` reads it."""
    LIVE_DIR.mkdir(parents=True, exist_ok=True)
    path = LIVE_DIR / f"{os.getpid()}.json"
    data = {"home": str(settings.home), "extra": [[p.pid, list(p.args)] for p in extra]}
    write_atomic(path, json.dumps(data).encode())
    return path


# --- server and workers -----------------------------------------------------------------------
class Site:
    """The embedded server, the local workers and any extra worker command, on one home."""

    def __init__(self, settings: Settings, extra: list[str], stream: Stream) -> None:
        self.settings = settings
        self.extra = extra
        self.stream = stream
        self.extra_procs: list[subprocess.Popen] = []
        self.local: dict[str, int] = {}
        self.client: Client | None = None
        self.live: Path | None = None

    async def up(self, gpu_queue: str) -> Client:
        from kernelopt.client import connect
        from kernelopt.follow import has_pollers
        from kernelopt.local_workers import ensure_local_workers, running
        from kernelopt.temporal_server import EmbeddedServer

        self.live = mark_live(self.settings)
        status = await asyncio.to_thread(EmbeddedServer(self.settings).start)
        self.stream.event("server_started", address=status.address, pid=status.pid)
        self.client = await connect(self.settings, start_embedded=False)
        self.local = await asyncio.to_thread(ensure_local_workers, self.settings)
        logs = self.settings.home / "workers"
        for i, command in enumerate(self.extra):
            argv = shlex.split(
                command.format(gpu_queue=gpu_queue, cpu_queue=self.settings.cpu_queue)
            )
            with (logs / f"extra{i}.log").open("ab") as log:
                self.extra_procs.append(
                    subprocess.Popen(
                        argv,
                        cwd=ROOT,
                        stdout=log,
                        stderr=subprocess.STDOUT,
                        stdin=subprocess.DEVNULL,
                        start_new_session=True,
                    )
                )
        mark_live(self.settings, self.extra_procs)
        self.stream.event(
            "workers_started",
            local=sorted(self.local),
            extra=[p.pid for p in self.extra_procs],
        )
        wanted = [(self.settings.cpu_queue, False), (self.settings.cpu_queue, True)]
        if any(n.startswith("gpu") for n in self.local) or self.extra_procs:
            wanted.append((gpu_queue, True))
        deadline = time.monotonic() + READY_S
        for queue, activity in wanted:
            while not await has_pollers(self.client, queue, activity=activity):
                dead = [f"extra{i}" for i, p in enumerate(self.extra_procs) if p.poll() is not None]
                dead += sorted(set(self.local) - set(running(self.settings)))
                if dead or time.monotonic() > deadline:
                    raise KernelOptError(
                        f"no worker polls {queue} ({', '.join(dead) or 'none'} exited, "
                        f"{time.monotonic() - deadline + READY_S:.0f} s); see {logs}/<name>.log"
                    )
                await asyncio.sleep(1.0)
        self.stream.event("workers_polling", queues=sorted({q for q, _ in wanted}))
        return self.client

    @property
    def serves_gpu(self) -> bool:
        """A GPU worker of ours runs: a local one, or an extra command still alive."""
        return any(n.startswith("gpu") for n in self.local) or any(
            p.poll() is None for p in self.extra_procs
        )

    def stop_workers(self) -> None:
        from kernelopt.local_workers import stop_local_workers

        for proc in self.extra_procs:
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGTERM)
        stopped = stop_local_workers(self.settings)
        for proc in self.extra_procs:
            try:
                proc.wait(40)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(10)
        self.stream.event("workers_stopped", local=stopped, extra=len(self.extra_procs))
        self.extra_procs = []

    def stop_server(self) -> None:
        from kernelopt.temporal_server import EmbeddedServer

        stopped = EmbeddedServer(self.settings).stop()
        if self.live is not None:
            self.live.unlink(missing_ok=True)
        self.stream.event("server_stopped", was_running=stopped)


# --- what each campaign is doing ---------------------------------------------------------------
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
        f"{_now()}, {stream.elapsed:.0f} s into this call",
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


# --- thin homes: the seed-drawn tensors stay behind and are drawn again ------------------------
REGENERABLE = ("args", "inputs", "init_inputs")  # a compile's tensors drawn from the problem's seed
THIN_MIN_BYTES = 1 << 20  # tensor archives below this travel whatever they are


class Regenerable(BaseModel):
    """A compile result and which of its tensors were drawn again here to the recorded digest."""

    compiled: dict[str, Any]  # the CompileResult (the compile cache's entry) as JSON
    fields: list[str] = Field(default_factory=list)
    note: str = ""


class _Discard:
    """An artifact backend that keeps nothing: ``save_tensors`` through it yields the digest."""

    def exists(self, sha256: str) -> bool:
        return False

    def read(self, sha256: str) -> bytes:
        raise KeyError(sha256)

    def write(self, sha256: str, data: bytes) -> None:
        return None


def _eval_dir(settings: Settings) -> Path:
    return settings.artifacts_dir.joinpath(*MANIFEST[:-1])


def _blob_path(settings: Settings, sha256: str) -> Path:
    return settings.artifacts_dir / sha256[:2] / sha256  # the local store's layout


def _seed_tensors(compiled: Any, store: Any) -> dict[str, list]:
    """The compile's args, inputs and init inputs drawn again on the CPU (``compile.rehydrate``)."""
    from kernelopt.compile.rehydrate import flat_args
    from kernelopt.compile.tensors import clone_exact
    from kernelopt.problem import load_module_problem

    source = store.get_text(compiled.problem.source)
    problem = load_module_problem(source, name=compiled.problem.name)
    seed = compiled.problem.seed
    model = problem.make_model(seed, "cpu")
    inputs = problem.make_inputs(seed, "cpu")
    return {
        "args": flat_args(compiled, model, inputs),
        "inputs": [clone_exact(x) for x in inputs],
        "init_inputs": problem.make_init_inputs(seed),
    }


def check_regenerable(compiled: Any, store: Any) -> Regenerable:
    """Which tensors of ``compiled`` this machine draws again bit for bit (digests compared)."""
    from kernelopt.compile.runtime import save_tensors
    from kernelopt.store import ArtifactStore

    entry = Regenerable(compiled=compiled.model_dump(mode="json"))
    if compiled.problem.kind.value != "module" or not compiled.arg_names:
        entry.note = "not a module problem with named arguments: its tensors travel"
        return entry
    try:
        values = _seed_tensors(compiled, store)
    except Exception as exc:  # the problem's own code, or a changed file: its tensors travel
        entry.note = f"cannot draw them again: {type(exc).__name__}: {exc}"[:300]
        return entry
    scratch = ArtifactStore(_Discard())
    for name in REGENERABLE:
        ref = getattr(compiled, name)
        if ref is not None and save_tensors(scratch, values[name], name).sha256 == ref.sha256:
            entry.fields.append(name)
    return entry


def _is_tensor_archive(path: Path) -> bool:
    """A ``torch.save`` file (a zip holding a ``data.pkl``)."""
    import zipfile

    try:
        with zipfile.ZipFile(path) as archive:
            return any(n.endswith("/data.pkl") or n == "data.pkl" for n in archive.namelist())
    except (zipfile.BadZipFile, OSError):
        return False


# an ArtifactRef as the pydantic converter writes it into a history, for one media type
_NCU_REF = re.compile(rb'"sha256":"([0-9a-f]{64})","size":\d+,"media_type":"application/x-ncu-rep"')


async def diagnostic_refs(client: Client, manifest: EvalManifest) -> set[str]:
    """Digests of the raw Nsight Compute reports the campaigns' histories name.

    A search keeps its profile's raw ``.ncu-rep`` (MiBs each) for people to open;
    no later step reads it (prompts use the distilled numbers), so a thin home
    leaves it behind.
    """
    from kernelopt.audit.runs import campaign_histories

    found: set[str] = set()
    for problem in manifest.campaigns():
        for _, history in await campaign_histories(client, problem.campaign_id):
            if history is None:
                continue
            for event in history.events:
                found.update(m.decode() for m in _NCU_REF.findall(event.SerializeToString()))
    return found


def thin_plan(
    settings: Settings, stream: Stream, all_finished: bool, diagnostics: set[str]
) -> list[str]:
    """Home-relative paths ``home.tgz`` leaves behind, recorded in ``left_out.json``.

    * a compile's args, inputs and init inputs, once drawn again here to the same digest
      (checked once per compile; ``resume`` draws them again before any worker starts);
    * the compile's reference output: restitch compares with it only when the store holds
      it, and nothing else reads it; raw Nsight Compute reports (``diagnostic_refs``);
    * once every campaign has finished, every tensor archive over THIN_MIN_BYTES (nothing
      runs again; the report reads histories and small files).
    """
    from kernelopt.contracts.compiled import CompileResult
    from kernelopt.store import open_store

    store = open_store(settings.artifacts_dir)
    directory = _eval_dir(settings) / "compiled"
    directory.mkdir(parents=True, exist_ok=True)
    known = {
        p.stem: Regenerable.model_validate_json(p.read_text()) for p in directory.glob("*.json")
    }
    for path in sorted((settings.home / "compile_cache").glob("*.json")):
        try:
            compiled = CompileResult.model_validate_json(path.read_text())
        except (OSError, ValueError):
            continue  # being written: the next pack takes it
        if compiled.cache_key in known:
            continue
        started = time.monotonic()
        entry = check_regenerable(compiled, store)
        write_atomic(directory / f"{compiled.cache_key}.json", entry.model_dump_json().encode())
        known[compiled.cache_key] = entry
        stream.event(
            "regenerable",
            problem=compiled.problem.name,
            fields=entry.fields,
            note=entry.note,
            seconds=round(time.monotonic() - started, 1),
        )
    records: dict[str, dict] = {}
    for key, entry in known.items():
        compiled = CompileResult.model_validate(entry.compiled)
        for name in [*entry.fields, "reference_output"]:
            ref = getattr(compiled, name)
            if ref is not None and _blob_path(settings, ref.sha256).is_file():
                rel = f"artifacts/{ref.sha256[:2]}/{ref.sha256}"
                records[rel] = {"path": rel, "sha256": ref.sha256, "field": name, "key": key}
    for sha256 in diagnostics:
        rel = f"artifacts/{sha256[:2]}/{sha256}"
        if rel not in records and _blob_path(settings, sha256).is_file():
            records[rel] = {"path": rel, "sha256": sha256, "field": "ncu report", "key": ""}
    if all_finished:
        for path in settings.artifacts_dir.glob("??/*"):
            rel = path.relative_to(settings.home).as_posix()
            big = path.stat().st_size >= THIN_MIN_BYTES
            if rel not in records and big and _is_tensor_archive(path):
                records[rel] = {"path": rel, "sha256": path.name, "field": "finished", "key": ""}
    write_atomic(
        _eval_dir(settings) / "left_out.json",
        json.dumps(sorted(records.values(), key=lambda r: r["path"]), indent=1).encode(),
    )
    return sorted(records)


def regenerate(settings: Settings, stream: Stream) -> list[str]:
    """Draw again what the last pack left behind; the digests that did not match, if any."""
    from kernelopt.compile.runtime import save_tensors
    from kernelopt.contracts.compiled import CompileResult
    from kernelopt.store import open_store

    path = _eval_dir(settings) / "left_out.json"
    if not path.is_file():
        return []
    store = open_store(settings.artifacts_dir)
    wanted: dict[str, list[dict]] = {}
    for record in json.loads(path.read_text()):
        if record["field"] in REGENERABLE and not store.exists(record["sha256"]):
            wanted.setdefault(record["key"], []).append(record)
    started, drawn, failed = time.monotonic(), 0, []
    for key, records in wanted.items():
        try:
            entry = Regenerable.model_validate_json(
                (_eval_dir(settings) / "compiled" / f"{key}.json").read_text()
            )
            compiled = CompileResult.model_validate(entry.compiled)
            values = _seed_tensors(compiled, store)
        except Exception as exc:  # drawn at the last pack; here the problem's own code ran
            failed.append(f"compile {key[:12]}: {type(exc).__name__}: {exc}"[:300])
            continue
        for record in records:
            name = f"{compiled.problem.name}_{record['field']}.pt"
            ref = save_tensors(store, values[record["field"]], name)
            drawn += 1
            if ref.sha256 != record["sha256"]:
                failed.append(
                    f"{compiled.problem.name} {record['field']}: {ref.sha256[:12]} != {record['sha256'][:12]}"
                )
    stream.event(
        "regenerated", blobs=drawn, failed=failed, seconds=round(time.monotonic() - started, 1)
    )
    return failed


# --- packing -----------------------------------------------------------------------------------
class Snapshotter:
    """``home.tgz`` in $OUT every ``every_s`` while running: a cut call can still be resumed."""

    def __init__(
        self,
        settings: Settings,
        stream: Stream,
        work: Path,
        every_s: float,
        client: Client,
        manifest: EvalManifest,
        call: EvalCall,
    ) -> None:
        self.settings, self.stream, self.work, self.every_s = settings, stream, work, every_s
        self.client, self.manifest, self.call = client, manifest, call
        self.last = time.monotonic()

    async def maybe(self, now: float) -> None:
        if self.every_s <= 0 or now - self.last < self.every_s:
            return
        self.last = now
        # the snapshot records this call so far: resumed after a cut, the record shows it
        self.call.seconds = round(self.stream.elapsed, 1)
        self.call.stopped = f"cut? last live snapshot at {self.stream.elapsed:.0f} s"
        save_manifest(self.settings, self.manifest)
        try:
            diagnostics = await diagnostic_refs(self.client, self.manifest)
            size = await asyncio.to_thread(
                export_home, self.settings, self.work, self.stream, False, diagnostics
            )
        except (KernelOptError, RPCError) as exc:
            self.stream.event("snapshot_failed", error=str(exc)[:300])
            return
        self.stream.event("snapshot", bytes=size, note="a live snapshot: resume it if cut")


def export_home(
    settings: Settings,
    work: Path,
    stream: Stream,
    all_finished: bool,
    diagnostics: set[str] = frozenset(),
) -> int:
    """``kernelopt state export`` (thin: ``thin_plan``) into the work dir, then $OUT/home.tgz."""
    from kernelopt.state_transfer import export_state

    archive = work / "home.tgz"
    leave_out = thin_plan(settings, stream, all_finished, set(diagnostics))
    report = export_state(settings, archive, leave_out=leave_out)
    stream.put("home.tgz", archive)
    m = report.manifest
    largest = sorted(m.files, key=lambda f: f.size, reverse=True)[:5]
    stream.event(
        "exported",
        bytes=report.archive.stat().st_size,
        files=len(m.files),
        parts={p.part: p.bytes for p in report.parts},
        left_out=len(m.left_out),
        left_out_bytes=sum(_blob_size(settings, p) for p in m.left_out),
        largest_kept=[f"{f.path} {f.size}" for f in largest],
    )
    return report.archive.stat().st_size


def _blob_size(settings: Settings, rel: str) -> int:
    path = settings.home / rel
    return path.stat().st_size if path.is_file() else 0


def pack_requests(settings: Settings, stream: Stream, work: Path) -> list[str]:
    """The requests still waiting, one ``ID.json`` each, as ``requests.tgz``."""
    folder = reply_folder.folders(settings.llm_dir)
    waiting = reply_folder.pending(folder)
    path = work / "requests.tgz"
    with tarfile.open(path, "w:gz") as tar:
        for doc in waiting:
            tar.add(doc["path"], arcname=Path(doc["path"]).name)
    stream.put("requests.tgz", path)
    return [d["request_id"] for d in waiting]


def pack_logs(settings: Settings, stream: Stream, work: Path) -> None:
    """Server and worker logs (their last LOG_TAIL_BYTES each) as ``logs.tgz``."""
    files = [settings.server_dir / "server.log", *sorted((settings.home / "workers").glob("*.log"))]
    path = work / "logs.tgz"
    with tarfile.open(path, "w:gz") as tar:
        for log in files:
            if not log.is_file():
                continue
            with log.open("rb") as handle:
                handle.seek(max(0, log.stat().st_size - LOG_TAIL_BYTES))
                data = handle.read()
            info = tarfile.TarInfo(log.relative_to(settings.home).as_posix())
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    stream.put("logs.tgz", path)


# --- replies -----------------------------------------------------------------------------------
def reply_files(source: Path, work: Path) -> list[Path]:
    """The reply files of a folder, or of a .tgz / .tar of them (plain files, names only)."""
    if source.is_dir():
        return sorted(p for p in source.iterdir() if p.is_file() and not p.name.startswith("."))
    if not source.is_file():
        raise KernelOptError(f"--replies {source} does not exist")
    target = work / "replies"
    target.mkdir(parents=True, exist_ok=True)
    with tarfile.open(source) as tar:
        for member in tar.getmembers():
            name = Path(member.name).name
            if not member.isfile() or not name or name.startswith("."):
                continue
            handle = tar.extractfile(member)
            if handle is not None:
                (target / name).write_bytes(handle.read())
    return sorted(target.iterdir())


def request_of(name: str, ids: set[str]) -> str | None:
    """The request id a reply file answers: ``ID``, ``ID.txt``, ``ID.md`` (the longest match)."""
    found = [rid for rid in ids if name == rid or name.startswith(rid + ".")]
    return max(found, key=len) if found else None


def known_requests(folder: reply_folder.Folders) -> dict[str, str]:
    """Every request id this home has seen -> where it is (requests / answered / withdrawn)."""
    where: dict[str, str] = {}
    for part in ("withdrawn", "answered", "requests"):  # the later wins
        directory = folder.root / part
        if directory.is_dir():
            for path in directory.glob("*.json"):
                where[path.stem] = part
    return where


async def deliver_replies(settings: Settings, files: list[Path], stream: Stream) -> tuple[int, int]:
    """Each reply through ``kernelopt reply``'s own code: written, then the search signalled."""
    from kernelopt.cli.llm_replies import cmd_reply

    folder = reply_folder.folders(settings.llm_dir)
    where = known_requests(folder)
    delivered = skipped = 0
    for path in files:
        rid = request_of(path.name, set(where))
        if rid is None or where[rid] != "requests":
            why = "no such request" if rid is None else f"request already {where[rid]}"
            stream.event("reply_skipped", file=path.name, why=why)
            skipped += 1
            continue
        try:
            await cmd_reply(argparse.Namespace(id=rid, file=path), settings)
        except KernelOptError as exc:
            stream.event("reply_skipped", file=path.name, why=str(exc)[:300])
            skipped += 1
            continue
        delivered += 1
        stream.event("reply_delivered", id=rid)
    return delivered, skipped


# --- the report --------------------------------------------------------------------------------
def llm_counts(folder: reply_folder.Folders) -> dict[str, dict[str, Counter]]:
    """campaign -> role -> {asked, answered, waiting, withdrawn}, from the reply folder."""
    out: dict[str, dict[str, Counter]] = {}
    for part, label in (
        ("requests", "waiting"),
        ("answered", "answered"),
        ("withdrawn", "withdrawn"),
    ):
        directory = folder.root / part
        if not directory.is_dir():
            continue
        for path in directory.glob("*.json"):
            try:
                doc = json.loads(path.read_text())
            except (OSError, ValueError):
                continue
            roles = out.setdefault(doc.get("campaign_id", ""), {})
            counts = roles.setdefault(doc.get("role", "?"), Counter())
            counts["asked"] += 1
            counts[label] += 1
    return out


def candidate_counts(audit: Any) -> dict[str, Any]:
    """How the campaign's candidates fared, gate by gate, from its audit."""
    from kernelopt.contracts.verdicts import GateName

    cands = list(audit.candidates)

    def passed(c: Any, gate: GateName) -> bool:
        return any(v.gate == gate and v.passed for v in c.verdicts)

    trials = list(audit.model_trials)
    return {
        "candidates": len(cands),
        "parsed": sum(1 for c in cands if c.deciding_gate != "parse"),
        "compiled": sum(1 for c in cands if passed(c, GateName.STATIC)),
        "correct": sum(1 for c in cands if passed(c, GateName.CORRECTNESS)),
        "passed_1_2": sum(1 for c in cands if c.passed_gates_1_2),
        "float64_in_search": sum(1 for c in cands if passed(c, GateName.MODEL)),
        "model_trials": len(trials),
        "gate3_passed": sum(
            1 for t in trials if any(v.gate == GateName.MODEL and v.passed for v in t.verdicts)
        ),
        "gate4_passed": sum(
            1
            for t in trials
            if any(v.gate == GateName.PERFORMANCE and v.passed for v in t.verdicts)
        ),
        "shipped": sum(1 for c in cands if c.final == "shipped"),
        "stopped_by": dict(Counter(c.deciding_gate for c in cands if c.deciding_gate)),
        "best_kernel_speedup": max((c.speedup for c in cands if c.speedup), default=None),
        "audit_checks_failed": [c.name for c in audit.checks if not c.ok],
    }


async def report_rows(client: Client, settings: Settings, manifest: EvalManifest) -> list[dict]:
    """One row per problem: outcome, speedup, candidates and gates, replies, tokens, GPU-s."""
    from kernelopt.audit import load_report
    from kernelopt.store import open_store

    store = open_store(settings.artifacts_dir)
    counts = llm_counts(reply_folder.folders(settings.llm_dir))
    rows = []
    for problem in manifest.problems:
        row: dict[str, Any] = {
            "problem": problem.name,
            "level": problem.level,
            "path": problem.path,
            "campaign_id": problem.campaign_id,
        }
        if not problem.campaign_id:
            rows.append(row | {"status": "not submitted", "error": problem.error})
            continue
        roles = counts.get(problem.campaign_id, {})
        row["llm"] = {role: dict(c) for role, c in sorted(roles.items())}
        row["replies"] = sum(roles.get(r, Counter())["answered"] for r in REPLY_ROLES)
        try:
            audit = await load_report(client, problem.campaign_id, store)
        except (KernelOptError, RPCError) as exc:
            rows.append(row | {"status": "unknown", "error": str(exc)[:300]})
            continue
        o = audit.outcome
        t = (o.triage or o.triage_ref) if o is not None else None
        row |= {
            "status": audit.status,
            "phase": audit.phase,
            "outcome": o.category.value if o else "",
            "speedup": o.speedup if o else None,
            "baseline_ms": o.baseline_ms if o else None,
            "optimized_ms": o.optimized_ms if o else None,
            "library_fraction": t.library_fraction if t is not None else None,
            "reason": o.reason if o else "",
            "tokens": audit.used.tokens,
            "gpu_seconds": round(audit.used.gpu_seconds, 1),
            "targets": len(audit.targets),
            **candidate_counts(audit),
        }
        rows.append(row)
    return rows


def _cell(value: Any, spec: str = "") -> str:
    if value is None or value == "":
        return "-"
    return f"{value:{spec}}" if spec else str(value)


def report_markdown(rows: list[dict], manifest: EvalManifest, title: str) -> str:
    search = manifest.options.get("search", {})
    lines = [
        f"# {title}",
        "",
        f"{_now()}; {len(manifest.calls)} call(s) so far; search: T={search.get('iterations')} "
        f"N={search.get('plans')} K={search.get('retries')} beam={search.get('beam')}, "
        f"max targets {manifest.options.get('max_targets')}, gamma {manifest.options.get('gamma')}.",
        "",
        "| problem | status | outcome | speedup | f | candidates | replies | parsed | compiled "
        "| correct | passed 1-2 | gate 3 | gate 4 | shipped | tokens | GPU-s |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            "| "
            + " | ".join(
                [
                    r["problem"],
                    _cell(r.get("status")),
                    _cell(r.get("outcome")),
                    "-" if r.get("speedup") is None else f"{r['speedup']:.3f}x",
                    _cell(r.get("library_fraction"), ".3f"),
                    _cell(r.get("candidates")),
                    _cell(r.get("replies")),
                    _cell(r.get("parsed")),
                    _cell(r.get("compiled")),
                    _cell(r.get("correct")),
                    _cell(r.get("passed_1_2")),
                    _cell(r.get("gate3_passed")),
                    _cell(r.get("gate4_passed")),
                    _cell(r.get("shipped")),
                    _cell(r.get("tokens")),
                    _cell(r.get("gpu_seconds")),
                ]
            )
            + " |"
        )
    lines += [
        "",
        "candidates: every reply-built candidate (execute and retry-fix); replies: executor and "
        "retry-fix replies collected; gate 3 / gate 4: re-stitched models that passed V_model / "
        "V_perf; tokens are estimated from the text in folder mode (4 characters a token).",
        "",
    ]
    for r in rows:
        notes = []
        if r.get("stopped_by"):
            notes.append(
                "stopped by " + ", ".join(f"{k} {v}" for k, v in sorted(r["stopped_by"].items()))
            )
        if r.get("llm"):
            notes.append(
                "requests "
                + ", ".join(
                    f"{role} {c.get('answered', 0)}/{c.get('asked', 0)}"
                    + (f" ({c['waiting']} waiting)" if c.get("waiting") else "")
                    for role, c in r["llm"].items()
                )
            )
        if r.get("reason"):
            notes.append(r["reason"])
        if r.get("error"):
            notes.append("error: " + r["error"])
        if r.get("audit_checks_failed"):
            notes.append("audit checks failed: " + ", ".join(r["audit_checks_failed"]))
        if notes:
            lines.append(
                f"* **{r['problem']}** ({r.get('campaign_id') or '-'}): " + "; ".join(notes)
            )
    lines += [
        "",
        "| call | command | host | started | seconds | replies delivered | skipped | stopped |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for i, c in enumerate(manifest.calls, 1):
        cells = [str(i), c.command, c.host, c.started_at, f"{c.seconds:.0f}"]
        cells += [str(c.replies_delivered), str(c.replies_skipped), c.stopped or "(this call)"]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


# --- the commands -----------------------------------------------------------------------------
def _settings(args: argparse.Namespace) -> Settings:
    """The environment's settings in folder mode; KERNELOPT_HOME must be chosen explicitly."""
    if not os.environ.get("KERNELOPT_HOME"):
        raise KernelOptError("set KERNELOPT_HOME to the (empty) home this call may use")
    return Settings.from_env(llm_mode="folder", llm_wait_limit_s=WAIT_LIMIT_S)


def _out(args: argparse.Namespace) -> Path:
    out = args.out or os.environ.get("OUT")
    if not out:
        raise KernelOptError("--out DIR (or $OUT) is needed")
    return Path(out)


def campaign_options_for(args: argparse.Namespace, settings: Settings) -> CampaignOptions:
    """The CLI's own option building (``kernelopt bench``'s flags), LLM proposer in folder mode."""
    from kernelopt.cli.parser import build_parser, campaign_options

    argv = ["bench", str(ROOT / "problems"), "--proposer", "llm", "--mode", args.mode]
    argv += ["--iterations", str(args.rounds), "--plans", str(args.plans)]
    argv += ["--retries", str(args.retries), "--beam", str(args.beam)]
    argv += ["--gamma", str(args.gamma), "--llm-model", args.llm_model]
    if args.max_targets:
        argv += ["--max-targets", str(args.max_targets)]
    if args.max_gpu_seconds:
        argv += ["--max-gpu-seconds", str(args.max_gpu_seconds)]
    return campaign_options(build_parser().parse_args(argv), settings)


def _level(path: Path) -> int | None:
    name = path.resolve().parent.name
    return int(name[5:]) if name.startswith("level") and name[5:].isdigit() else None


def _shown(path: Path) -> str:
    resolved = path.resolve()
    return str(resolved.relative_to(ROOT)) if resolved.is_relative_to(ROOT) else str(resolved)


async def submit_all(
    client: Client,
    settings: Settings,
    paths: list[Path],
    options: CampaignOptions,
    stream: Stream,
) -> list[EvalProblem]:
    """Preflight every file (in parallel, on the CPU) and submit one campaign per good one."""
    from kernelopt.campaigns import prepare_problem, start_campaign
    from kernelopt.preflight_problem import preflight
    from kernelopt.store import open_store

    store = open_store(settings.artifacts_dir)
    checks = await asyncio.gather(
        *(asyncio.to_thread(preflight, p) for p in paths), return_exceptions=True
    )
    problems = []
    for path, check in zip(paths, checks, strict=True):
        problem = EvalProblem(path=_shown(path), name=path.stem, level=_level(path))
        problems.append(problem)
        if isinstance(check, BaseException):
            problem.error = str(check)[:500]
            stream.event("problem_rejected", problem=problem.name, error=problem.error)
            continue
        spec = prepare_problem(path, store, level=problem.level)
        handle = await start_campaign(client, spec, options)
        problem.campaign_id = handle.id
        stream.event("campaign_submitted", problem=problem.name, id=handle.id)
    return problems


async def run_call(
    command: str,
    args: argparse.Namespace,
    settings: Settings,
    stream: Stream,
    work: Path,
    prepare: Any,
) -> int:
    """Everything one call does around ``prepare`` (submitting, or delivering replies)."""
    deadline = stream.started + args.budget_s  # from the process's start: imports, restore
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    from kernelopt.campaigns import default_gpu_queue

    call = EvalCall(command=command, host=socket.gethostname(), started_at=_now())
    site = Site(settings, args.extra_worker, stream)
    stopped, looks, rows, diagnostics = "", [], [], set()
    manifest: EvalManifest | None = None
    try:
        client = await site.up(default_gpu_queue(settings))
        manifest = await prepare(client, call)
        manifest.calls.append(call)  # filled in below; the tables count this call
        gpu_queue = manifest.options.get("gpu_queue") or default_gpu_queue(settings)
        snapshot = Snapshotter(settings, stream, work, args.snapshot_s, client, manifest, call)
        stopped, looks = await run_until_settled(
            client, manifest, settings, gpu_queue, stream, deadline, stop, snapshot, site
        )
        stream.event("loop_ended", why=stopped)
    except BaseException as exc:
        stream.event("failed", error=f"{type(exc).__name__}: {exc}"[:500])
        raise
    finally:
        site.stop_workers()
        if manifest is not None and site.client is not None:
            try:
                rows = await asyncio.wait_for(report_rows(site.client, settings, manifest), 90)
                stream.table(report_markdown(rows, manifest, f"llm_eval after {command}"))
                diagnostics = await asyncio.wait_for(diagnostic_refs(site.client, manifest), 60)
            except (TimeoutError, KernelOptError, RPCError) as exc:
                stream.event("table_failed", error=str(exc)[:300])
        site.stop_server()
    call.seconds = round(stream.elapsed, 1)
    call.stopped = stopped
    call.states = {look.campaign_id: f"{look.state} {look.detail}".strip() for look in looks}
    save_manifest(settings, manifest)
    all_finished = bool(looks) and all(look.state not in ("running", "waiting") for look in looks)
    size = export_home(settings, work, stream, all_finished, diagnostics)
    waiting = pack_requests(settings, stream, work)
    pack_logs(settings, stream, work)
    summary = {
        "command": command,
        "stopped": stopped,
        "seconds": call.seconds,
        "all_finished": all_finished,
        "home_tgz_bytes": size,
        "requests_waiting": waiting,
        "replies_delivered": call.replies_delivered,
        "replies_skipped": call.replies_skipped,
        "states": call.states,
        "rows": rows,
    }
    if size > CARRY_WARN_BYTES:
        summary["warning"] = (
            f"home.tgz is {size / 2**20:.1f} MiB: a file comes back from the device only up to "
            "16 MiB, and the next call carries it beside the tree, .whl and .device (64 MiB in all)"
        )
        stream.event("warning", text=summary["warning"])
    write_atomic(stream.out / "summary.json", json.dumps(summary, indent=1, default=str).encode())
    finished = sum(1 for look in looks if look.state == "finished")
    stream.event(
        "packed",
        home_tgz_bytes=size,
        requests_waiting=len(waiting),
        finished=finished,
        campaigns=len(looks),
        seconds=round(stream.elapsed, 1),
    )
    return 0


@contextlib.contextmanager
def said(stream: Stream):
    """A failure before or around the run is an event too: $OUT says why the call ended."""
    try:
        yield
    except (KernelOptError, OSError) as exc:
        if not stream.failed:
            stream.event("failed", error=f"{type(exc).__name__}: {exc}"[:500])
        raise


async def cmd_start(args: argparse.Namespace) -> int:
    settings = _settings(args)
    stream = Stream(_out(args))
    try:
        with said(stream), tempfile.TemporaryDirectory(prefix="llm-eval-") as work:
            return await _start(args, settings, stream, Path(work))
    finally:
        stream.close()


async def _start(args: argparse.Namespace, settings: Settings, stream: Stream, work: Path) -> int:
    await asyncio.to_thread(stop_leftovers, stream)
    if (settings.server_dir / "temporal.db").exists() or manifest_path(settings).exists():
        raise KernelOptError(f"{settings.home} already holds state: start wants an empty home")
    options = campaign_options_for(args, settings)
    paths = [Path(p) for p in args.problems]
    stream.event(
        "start",
        home=str(settings.home),
        problems=[_shown(p) for p in paths],
        search=options.search.model_dump(
            mode="json", include={"iterations", "plans", "retries", "beam"}
        ),
        max_targets=options.max_targets,
        gpu_queue=options.gpu_queue,
    )

    async def prepare(client: Client, call: EvalCall) -> EvalManifest:
        manifest = EvalManifest(
            created_at=_now(), rounds=args.rounds, options=options.model_dump(mode="json")
        )
        manifest.problems = await submit_all(client, settings, paths, options, stream)
        save_manifest(settings, manifest)
        return manifest

    return await run_call("start", args, settings, stream, work, prepare)


async def cmd_resume(args: argparse.Namespace) -> int:
    settings = _settings(args)
    stream = Stream(_out(args))
    try:
        with said(stream), tempfile.TemporaryDirectory(prefix="llm-eval-") as work:
            return await _resume(args, settings, stream, Path(work))
    finally:
        stream.close()


async def _resume(args: argparse.Namespace, settings: Settings, stream: Stream, work: Path) -> int:
    from kernelopt.state_transfer import import_state

    await asyncio.to_thread(stop_leftovers, stream)
    files = reply_files(Path(args.replies), work) if args.replies else []
    restored = import_state(settings, Path(args.home), force=args.force)
    stream.event(
        "restored",
        home=str(settings.home),
        archive_sha256=restored.archive_sha256[:12],
        exported_from=restored.manifest.source,
        warnings=restored.warnings,
        reply_files=len(files),
    )
    failed = await asyncio.to_thread(regenerate, settings, stream)
    if failed:
        stream.event("warning", text=f"tensors not drawn again to their digests: {failed}")

    async def prepare(client: Client, call: EvalCall) -> EvalManifest:
        manifest = load_manifest(settings)
        call.replies_delivered, call.replies_skipped = await deliver_replies(
            settings, files, stream
        )
        return manifest

    return await run_call("resume", args, settings, stream, work, prepare)


async def cmd_report(args: argparse.Namespace) -> int:
    """Restore into a private home, start a server (no workers), read the audits, stop."""
    from kernelopt.client import connect
    from kernelopt.state_transfer import import_state
    from kernelopt.temporal_server import EmbeddedServer

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="llm-eval-report-") as tmp:
        settings = Settings(home=Path(tmp) / "home", server_port=_free_port(), ui_port=_free_port())
        import_state(settings, Path(args.home))
        manifest = load_manifest(settings)
        server = EmbeddedServer(settings)
        await asyncio.to_thread(server.start)
        try:
            client = await connect(settings, start_embedded=False)
            rows = await report_rows(client, settings, manifest)
        finally:
            server.stop()
    text = report_markdown(rows, manifest, "llm_eval report")
    write_atomic(out / "report.md", text.encode("utf-8"))
    data = {"generated_at": _now(), "manifest": manifest.model_dump(mode="json"), "rows": rows}
    write_atomic(out / "report.json", json.dumps(data, indent=1, default=str).encode("utf-8"))
    print(text, end="")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="llm_eval", description=(__doc__ or "").splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)

    def running(p: argparse.ArgumentParser) -> None:
        p.add_argument("--out", type=Path, default=None, help="where results go (default $OUT)")
        p.add_argument(
            "--budget-s",
            type=float,
            default=450.0,
            help="seconds from this process's start until the campaigns are stopped and "
            "packed (default 450: stopping and packing take 20-100 s more, and a device call "
            "ends at 600 s)",
        )
        p.add_argument(
            "--snapshot-s",
            type=float,
            default=150.0,
            help="write a live home.tgz snapshot this often (0: only at the end)",
        )
        p.add_argument(
            "--extra-worker",
            action="append",
            default=[],
            metavar="CMD",
            help="another worker command run beside the local ones ({gpu_queue}, {cpu_queue} "
            "are filled in), e.g. a GPU stand-in on a CPU machine",
        )

    start = sub.add_parser("start", help="submit one folder-mode campaign per problem and run")
    start.add_argument("--problems", type=Path, nargs="+", required=True)
    start.add_argument("--rounds", type=int, default=2, help="search iterations T (default 2)")
    start.add_argument("--plans", type=int, default=2, help="plans per round N (default 2)")
    start.add_argument("--retries", type=int, default=1, help="retry-fix attempts K (default 1)")
    start.add_argument("--beam", type=int, default=1, help="beam width B (default 1)")
    start.add_argument("--max-targets", type=int, default=1, help="targets searched (default 1)")
    start.add_argument("--mode", default="auto", help="auto, single or multi (default auto)")
    start.add_argument("--gamma", type=float, default=1.03)
    start.add_argument("--max-gpu-seconds", type=float, default=None)
    start.add_argument(
        "--llm-model", default="reply-folder", help="label of whoever writes the replies"
    )
    running(start)

    resume = sub.add_parser("resume", help="restore home.tgz, deliver replies, run, pack")
    resume.add_argument("--home", type=Path, required=True, help="the previous call's home.tgz")
    resume.add_argument(
        "--replies", type=Path, default=None, help="a folder (or .tgz) of ID.txt reply files"
    )
    resume.add_argument(
        "--force", action="store_true", help="replace state already in KERNELOPT_HOME"
    )
    running(resume)

    report = sub.add_parser("report", help="the outcome table of a home.tgz")
    report.add_argument("--home", type=Path, required=True)
    report.add_argument("--out", type=Path, required=True)
    return parser


COMMANDS = {"start": cmd_start, "resume": cmd_resume, "report": cmd_report}


def main(argv: list[str] | None = None) -> int:
    from kernelopt.log import configure

    args = build_parser().parse_args(argv)
    configure(level=os.environ.get("KERNELOPT_LOG_LEVEL", "warning"))
    try:
        code = asyncio.run(COMMANDS[args.command](args))
    except KernelOptError as exc:
        print(f"llm_eval {args.command}: {exc}", file=sys.stderr, flush=True)
        code = 2
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)  # skip finalisation: the Temporal client's core threads can abort it


if __name__ == "__main__":
    main()
