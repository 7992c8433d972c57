"""Run one gate job in an isolated child process: a crash is a verdict, never ours.

The child is a fresh interpreter (``python -m gates.child``) in its own
process group, so a hang, a segfault, an illegal memory access or a CUDA
error in candidate code ends only that child.  The outcome is always a
``ChildOutcome``: ``ok``, ``exception`` (Python error, with traceback and the
phase it happened in), ``crashed`` (died without a result: signal or exit
code, with the log tail) or ``timeout`` (killed as a group).

The device is configurable: ``cpu`` children run Triton kernels under the
interpreter (``TRITON_INTERPRET=1``), which is how CI tests the gates.

Every child imports candidate code, so every child runs in a bubblewrap
sandbox (``gates.sandbox``): spawned ones each in their own, forked ones in
their zygote's.  ``KERNELOPT_SANDBOX=off`` is the explicit, logged opt-out.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from gates import first_sight, sandbox
from gates.job_progress import StallWatch, wait_for
from gates.proctree import HostTree, TreeSignaller
from gates.protocol import ModelSource, TimingJob
from gates.sandbox_stage import LIVE_FILE
from gates.zygote import Zygote, ZygoteError
from gates.zygote_client import (
    DEVICE_ENV,
    SOCKET_ENV,
    ServiceError,
    run_via_service,
)
from kernelopt.log import get_logger

_LOG = get_logger(__name__)

_REPO_ROOT = Path(__file__).resolve().parent.parent


# torch's message when one op gets tensors of two devices, and what usually causes it
_MIXED_DEVICES = "Expected all tensors to be on the same device"
_MIXED_DEVICES_HINT = (
    " (the code mixes devices: a tensor it creates without device= is made on the CPU;"
    " make it where the inputs are, e.g. torch.randn(x.shape, device=x.device))"
)


def _first_sentence(message: str) -> str:
    """A message's first line, and the next when the first only introduces it (torch's
    "backend='inductor' raised:" puts the cause on the line below)."""
    lines = [line.strip() for line in message.splitlines() if line.strip()]
    if not lines:
        return ""
    if lines[0].endswith(":") and len(lines) > 1:
        return f"{lines[0]} {lines[1]}"
    return lines[0]


@dataclass
class ChildOutcome:
    status: str  # "ok" | "exception" | "crashed" | "timeout"
    phase: str  # the last phase the child entered
    wall_s: float
    result: dict[str, Any] | None = None
    error_type: str = ""
    message: str = ""
    traceback: str = ""
    returncode: int | None = None
    log_tail: str = ""
    phases: list[str] = field(default_factory=list)
    progress: list[dict[str, Any]] = field(default_factory=list)
    workdir: str = ""
    stalled: bool = False  # "timeout" because it stopped marking progress (``stall_s``)
    explained: bool = False  # the child's error message says it all (``DeterministicError``)

    @property
    def where(self) -> str:
        """The last phase with its detail, e.g. ``call seed1`` or ``screen cand3``."""
        last = self.progress[-1] if self.progress else {}
        detail = last.get("set") or last.get("candidate") or last.get("job") or ""
        return f"{self.phase} {detail}".strip()

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def describe(self) -> str:
        """One line saying how the child ended."""
        if self.status == "ok":
            return "ok"
        if self.status == "timeout":
            if self.stalled:
                return f"stalled during {self.where}: {self.message} (killed)"
            return f"timed out during {self.where} (killed)"
        if self.status == "crashed":
            how = (
                f"signal {signal.Signals(-self.returncode).name}"
                if self.returncode is not None and self.returncode < 0
                else f"exit code {self.returncode}"
            )
            return f"process died ({how}) during {self.where}"
        first = _first_sentence(self.message)
        hint = _MIXED_DEVICES_HINT if _MIXED_DEVICES in first else ""
        return f"{self.error_type} during {self.where}: {first}{hint}"

    def error_text(self, limit: int = 4000) -> str:
        """The traceback (or log tail) as text fit for a verdict."""
        text = self.traceback or self.log_tail or self.message
        return text[-limit:]

    def phase_seconds(self, prefix: str) -> dict[str, float]:
        """Seconds per progress phase, keyed ``prefix.phase``, so a slow gate says which step.

        ``prefix.outside`` is the wall time outside the marks: process start-up
        (fork or interpreter, imports) before the first, exit after the last.
        A phase that recurs (one per input set) is summed.
        """
        marks = [(str(p.get("phase", "")), float(p.get("t", 0.0))) for p in self.progress]
        if not marks:
            return {f"{prefix}.outside": round(self.wall_s, 3)}
        seconds: dict[str, float] = {}
        for (phase, start), (_, end) in itertools.pairwise(marks):
            seconds[phase] = seconds.get(phase, 0.0) + end - start
        span = marks[-1][1] - marks[0][1]
        seconds["outside"] = max(0.0, self.wall_s - span)
        return {f"{prefix}.{k}": round(v, 3) for k, v in seconds.items()}

    def summary(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "phase": self.phase,
            "wall_s": round(self.wall_s, 3),
            "returncode": self.returncode,
            "error_type": self.error_type,
            "message": self.message[:500],
        }


def child_env(device: str, extra: dict[str, str] | None = None) -> dict[str, str]:
    """A gate child's environment: an allow-list when sandboxed (no keys, no addresses)."""
    env = dict(os.environ)
    # Gate jobs (candidate code among them) have no business with the worker's zygote.
    env.pop("KERNELOPT_ZYGOTE_SOCKET", None)
    env.pop("KERNELOPT_ZYGOTE_DEVICE", None)
    # Inductor's compile-worker pool would outlive a killed child; compile in-process.
    env.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "1")
    if device == "cpu":
        env["TRITON_INTERPRET"] = "1"
    else:
        env.pop("TRITON_INTERPRET", None)
    if sandbox.enabled():
        return sandbox.sandbox_env(env, extra)
    path = env.get("PYTHONPATH", "")
    env["PYTHONPATH"] = str(_REPO_ROOT) + (os.pathsep + path if path else "")
    env["PYTHONUNBUFFERED"] = "1"
    env.update(extra or {})
    return env


def run_job(
    job: BaseModel,
    workdir: Path,
    *,
    timeout_s: float,
    device: str,
    env: dict[str, str] | None = None,
    via: Zygote | None = None,
    stall_s: float | None = None,
    on_start: Callable[[TreeSignaller], None] | None = None,
) -> ChildOutcome:
    """Run ``job`` in a fresh child process and wait for it (at most ``timeout_s``).

    The child forks from ``via`` if given, else from this process's zygote
    (``fast_launch``), else from the worker's shared zygote (``gates.zygote_service``),
    else it is a freshly spawned interpreter.  A custom ``env`` always spawns.
    With ``stall_s``, a child that marks no progress for that long is killed too
    (a ``timeout`` outcome with ``stalled`` set): a job of many candidates, each
    of which may hang, says so.  ``on_start`` is called as soon as the child runs
    with a handle that stops, resumes, pins and kills its whole tree
    (``gates.turns``): host-PID signals for a spawned child, the zygote's
    commands for a forked one (a sandboxed zygote's PIDs are its namespace's own).
    """
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    for stale in ("result.json", "progress.jsonl", LIVE_FILE):
        (workdir / stale).unlink(missing_ok=True)
    shutil.rmtree(workdir / first_sight.FOLDER, ignore_errors=True)
    (workdir / "job.json").write_text(job.model_dump_json())
    sandbox.write_limits(workdir, sandbox.SandboxLimits.from_env(timeout_s))
    log_path = workdir / "child.log"
    started = time.monotonic()
    with first_sight.courier_for(job, workdir) as courier:  # a timing child's first-sight sets
        returncode, killed = _launch(
            workdir, log_path, timeout_s, device, env, via, stall_s, on_start
        )
    wall = time.monotonic() - started
    progress = _read_progress(workdir / "progress.jsonl")
    phases = [str(p.get("phase", "")) for p in progress]
    phase = phases[-1] if phases else "start"
    # what every outcome records of the child, whatever became of it
    seen: dict[str, Any] = {
        "returncode": returncode,
        "log_tail": _tail(log_path),
        "phases": phases,
        "progress": progress,
        "workdir": str(workdir),
    }
    if killed:
        stalled = killed == "stall"
        return ChildOutcome(
            "timeout",
            phase,
            wall,
            message=(
                f"no progress within {stall_s:g} s"
                if stalled
                else f"no result within {timeout_s:g} s"
            ),
            stalled=stalled,
            **seen,
        )
    if courier is not None and courier.problems:  # whatever the child says of itself
        return ChildOutcome(
            "exception",
            phase,
            wall,
            error_type="FirstSightRefused",
            message="the first-sight handoff was tampered with: " + "; ".join(courier.problems),
            explained=True,
            **seen,
        )
    result_path = workdir / "result.json"
    payload: dict[str, Any] | None = None
    if result_path.is_file():
        with contextlib.suppress(json.JSONDecodeError):
            payload = json.loads(result_path.read_text())
    if payload is None:
        return ChildOutcome("crashed", phase, wall, **seen)
    if payload.get("ok"):
        return ChildOutcome(
            "ok", payload.get("phase", phase), wall, result=payload.get("result"), **seen
        )
    return ChildOutcome(
        "exception",
        payload.get("phase", phase),
        wall,
        error_type=payload.get("error_type", ""),
        message=payload.get("message", ""),
        traceback=payload.get("traceback", ""),
        explained=bool(payload.get("explained")),
        **seen,
    )


def _launch(
    workdir: Path,
    log_path: Path,
    timeout_s: float,
    device: str,
    env: dict[str, str] | None,
    via: Zygote | None,
    stall_s: float | None,
    on_start: Callable[[TreeSignaller], None] | None = None,
) -> tuple[int | None, str]:
    """How the child ended: its exit code, and "" or why it was killed ("timeout", "stall")."""
    zygote = via or (_ZYGOTES.get(device) if env is None else None)
    if zygote is not None and zygote.alive:
        return _run_forked(zygote, workdir, timeout_s, stall_s, on_start)
    service = os.environ.get(SOCKET_ENV)
    if env is None and service and os.environ.get(DEVICE_ENV) == device:
        try:
            return run_via_service(service, workdir, timeout_s, stall_s, on_start=on_start)
        except ServiceError as exc:
            if on_start is not None and exc.started:
                raise  # the caller holds the forked child: a second one would be a new job
            _LOG.warning("shared zygote failed; spawning", reason=str(exc))
    return _run_spawned(
        workdir, log_path, timeout_s, stall_s, child_env(device, env), on_start=on_start
    )


def _run_spawned(
    workdir: Path,
    log_path: Path,
    timeout_s: float,
    stall_s: float | None,
    env: dict[str, str],
    on_start: Callable[[TreeSignaller], None] | None = None,
) -> tuple[int | None, str]:
    """A fresh interpreter: the most isolated launch, used when no zygote is running.

    Sandboxed, it gets a sandbox of its own: a PID namespace that dies with it
    takes every daemon the candidate started along.
    """
    argv = [sys.executable, "-P", "-m", "gates.child", str(workdir)]  # -P: as the zygote's
    if sandbox.enabled():
        job = json.loads((workdir / "job.json").read_text())
        limits = sandbox.SandboxLimits.from_env(timeout_s)
        argv = sandbox.wrap_job(argv, job, workdir, limits)
    else:
        sandbox.warn_unsandboxed("spawned gate child")
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=str(workdir),
            env=env,
            start_new_session=True,
        )
        killed = ""
        try:
            if on_start is not None:
                on_start(HostTree(proc.pid))
            _, killed = wait_for(_poll(proc), timeout_s, StallWatch(workdir, stall_s))
            if killed:
                _kill_group(proc.pid)
                proc.wait()
        finally:
            # Grandchildren (compile workers, anything the candidate spawned) go too.
            _kill_group(proc.pid)
    code = proc.returncode
    if argv[0] != sys.executable and code is not None and 128 < code <= 128 + 64:
        code = 128 - code  # bwrap reports its child's death by signal N as exit 128 + N
    return code, killed


def _poll(proc: subprocess.Popen[bytes]) -> Callable[[float], int | None]:
    def poll(seconds: float) -> int | None:
        try:
            return proc.wait(timeout=seconds)
        except subprocess.TimeoutExpired:
            return None

    return poll


def _run_forked(
    zygote: Zygote,
    workdir: Path,
    timeout_s: float,
    stall_s: float | None,
    on_start: Callable[[TreeSignaller], None] | None = None,
) -> tuple[int | None, str]:
    pid = zygote.spawn(workdir)
    if on_start is not None:
        try:
            on_start(zygote.signaller(pid))
        except BaseException:
            zygote.kill(pid)
            zygote.wait(pid, 30.0)
            raise
    watch = StallWatch(zygote.workdir_of(pid, workdir), stall_s)
    code, killed = wait_for(lambda seconds: zygote.wait(pid, seconds), timeout_s, watch)
    if killed:
        zygote.kill(pid)
        code = zygote.wait(pid, 30.0)
    zygote.kill(pid)  # the child's process group: anything it spawned
    return code, killed


_ZYGOTES: dict[str, Zygote] = {}


@dataclass
class LaunchInfo:
    """What ``fast_launch`` set up: truthy when jobs fork from a verified zygote."""

    started: bool
    note: str
    seconds: float

    def __bool__(self) -> bool:
        return self.started


_PROBE_PROBLEM = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x) * 2.0 + 1.0


def get_init_inputs():
    return []


def get_inputs():
    return [torch.randn(1024, 256)]
"""


def probe_zygote(zygote: Zygote, device: str, timeout_s: float = 120.0) -> ChildOutcome:
    """One real job through ``zygote``: CUDA, an Inductor compile, Triton JIT, do_bench."""
    import tempfile

    import torch

    tmp = Path(tempfile.mkdtemp(prefix="kernelopt-probe-"))
    try:
        problem = tmp / "probe_problem.py"
        problem.write_text(_PROBE_PROBLEM)
        torch.save([torch.randn(1024, 256)], tmp / "probe.pt")
        job = TimingJob(
            side="baseline",
            model=ModelSource(
                kind="compiled" if device.startswith("cuda") else "eager",
                problem_path=str(problem),
                compile_mode="default",
            ),
            device=device,
            inputs_dir=str(tmp),
            input_set="probe",
            warmup_ms=1.0,
            rep_ms=2.0,
            host_batches=1,
        )
        return run_job(job, tmp / "job", timeout_s=timeout_s, device=device, via=zygote)
    finally:
        import shutil

        shutil.rmtree(tmp, ignore_errors=True)


def zygote_env(device: str) -> dict[str, str]:
    """The environment a zygote for ``device`` starts with."""
    extra = None
    if device.startswith("cuda"):
        # NVML-based device counts: an import that asks "is CUDA available?" must not
        # cuInit the zygote (forked children could not use the GPU after that).
        extra = {"KERNELOPT_ZYGOTE_CUDA": "1", "PYTORCH_NVML_BASED_CUDA_CHECK": "1"}
    return child_env(device, extra)


@contextlib.contextmanager
def verified_zygote(
    device: str, *, probe_timeout_s: float = 120.0
) -> Iterator[tuple[Zygote | None, LaunchInfo]]:
    """A zygote for ``device`` that has run one real job (``probe_zygote``), closed on exit.

    Starting one is the expensive part, so it is kept apart from registering it
    (``forking_from``): a test session starts one and lends it only where asked.
    The zygote is ``None`` when it could not start or its probe failed, and the
    ``LaunchInfo`` says why.
    """
    started = time.monotonic()
    try:
        zygote = Zygote(zygote_env(device), start_timeout_s=90.0)
    except ZygoteError as exc:
        yield None, LaunchInfo(False, f"zygote did not start: {exc}", time.monotonic() - started)
        return
    try:
        outcome = probe_zygote(zygote, device, probe_timeout_s)
    except BaseException:
        zygote.close()
        raise
    if not outcome.ok:
        zygote.close()
        note = f"zygote probe failed ({outcome.describe()}); spawning fresh interpreters"
        yield None, LaunchInfo(False, note, time.monotonic() - started)
        return
    try:
        note = f"zygote ready, probe {outcome.wall_s:.1f} s"
        yield zygote, LaunchInfo(True, note, time.monotonic() - started)
    finally:
        zygote.close()


@contextlib.contextmanager
def forking_from(device: str, zygote: Zygote | None) -> Iterator[None]:
    """Within this block, jobs on ``device`` fork from ``zygote`` (``None``: they spawn).

    On exit the registration it replaced comes back, so a block inside another
    (a test inside a session that lent its zygote) never drops the outer one. If
    something else replaced the registration meanwhile, that one is left alone.
    """
    before = _ZYGOTES.get(device)
    _register(device, zygote)
    try:
        yield
    finally:
        if _ZYGOTES.get(device) is zygote:
            _register(device, before)


def _register(device: str, zygote: Zygote | None) -> None:
    if zygote is None:
        _ZYGOTES.pop(device, None)
    else:
        _ZYGOTES[device] = zygote


@contextlib.contextmanager
def fast_launch(device: str, *, probe_timeout_s: float = 120.0) -> Iterator[LaunchInfo]:
    """Within this block, gate jobs on ``device`` fork from a preloaded zygote.

    The zygote must first run one real job (``probe_zygote``); if it cannot start or
    the probe fails, jobs launch as they would without this block (slower, same
    isolation) and the yielded ``LaunchInfo`` says why. On exit the zygote closes
    and whatever was registered before comes back (``forking_from``).
    """
    with verified_zygote(device, probe_timeout_s=probe_timeout_s) as (zygote, info):
        if zygote is None:
            yield info
            return
        with forking_from(device, zygote):
            yield info


def _kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


def _read_progress(path: Path) -> list[dict[str, Any]]:
    if not path.is_file():
        return []
    records = []
    for line in path.read_text(errors="replace").splitlines():
        with contextlib.suppress(json.JSONDecodeError):
            value = json.loads(line)
            if isinstance(value, dict):
                records.append(value)
    return records


def _tail(path: Path, limit: int = 6000) -> str:
    if not path.is_file():
        return ""
    data = path.read_bytes()[-limit:]
    return data.decode("utf-8", "replace")
