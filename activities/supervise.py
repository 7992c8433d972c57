"""Run GPU work in a supervised child process.

A CUDA fault, an illegal memory access or a hang must never take a worker
down, so GPU activities do their work in a child: its own process group
(killed as a whole on cancellation or timeout), killed with its parent
(PR_SET_PDEATHSIG), heartbeating through the parent while it runs, and with
failures turned into text before they cross the process boundary.  The
child learns its job through its stdin, so a GPU worker can start it before
the job exists (``activities.spare_child``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import tempfile
import time
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel
from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities import spare_child
from activities.heartbeat import HeldClock, reporting_loss
from gates.gpu_lease import LEASE_ENV, Mode
from kernelopt.checkpoint import PROGRESS_PREFIX, RESUME_ENV, SPAWNED_AT_ENV
from kernelopt.config import Settings
from kernelopt.log import get_logger
from kernelopt.stages import add_stages

M = TypeVar("M", bound=BaseModel)
log = get_logger(__name__)


async def run_supervised(
    target: str,
    inp: BaseModel,
    result_type: type[M],
    *,
    heartbeat_every: float = 5.0,
    timeout_s: float | None = None,
    env: dict[str, str] | None = None,
    lease: Mode | None = None,
) -> M:
    """Run ``module:function(inp, store)`` in a child process and return its result.

    Inside an activity: heartbeats every ``heartbeat_every`` seconds with the
    child's latest progress detail, hands a retry the previous attempt's
    detail, and kills the child's process group when the activity is
    cancelled.  Outside one (``kernelopt verify``), it simply runs the child.  ``lease``:
    the child's whole job holds the GPU's lease in that mode (``gates.gpu_lease``); without
    it the job takes its own sections, or puts no work on the GPU.
    """
    in_activity = activity.in_activity()
    log.info("child started", target=target)
    resume = None
    if in_activity:
        details = activity.info().heartbeat_details
        if details:
            resume = details[0]
    with tempfile.TemporaryDirectory(prefix="kernelopt-child-") as tmp:
        in_path = Path(tmp) / "input.json"
        out_path = Path(tmp) / "output.json"
        in_path.write_text(inp.model_dump_json())
        settings = Settings.from_env()
        secrets = {"KERNELOPT_API_KEY", "OPENAI_API_KEY", settings.llm_api_key_env}
        # GPU children run candidate code: they get no credential they were not handed.
        child_env = {k: v for k, v in os.environ.items() if k not in secrets}
        child_env.update(env or {})
        child_env.setdefault("KERNELOPT_HOME", str(settings.home))
        job_env = {SPAWNED_AT_ENV: repr(time.time())}
        if lease is not None:
            job_env[LEASE_ENV] = lease
        if resume is not None:
            job_env[RESUME_ENV] = json.dumps(resume, default=str)
        proc = await spare_child.take(child_env)
        held = HeldClock()  # earlier attempts' run time (a killed worker's) included

        exited = time.time()  # set again when the child exits
        state: dict[str, object] = {"detail": resume, "tail": [], "held": held}
        reader = asyncio.create_task(_read_progress(proc, state))
        gone = asyncio.create_task(_exit_of(proc))
        # a cancel from the worker's shutdown leaves as WorkerShutdown with the time held
        with reporting_loss(held):
            try:
                await _hand_job(proc, target, in_path, out_path, job_env)
                await spare_child.replenish(child_env, target)
                while True:
                    try:
                        await asyncio.wait_for(asyncio.shield(gone), heartbeat_every)
                        exited = time.time()
                        break
                    except TimeoutError:
                        pass
                    if in_activity:
                        activity.heartbeat(state["detail"], held())
                    if timeout_s is not None and time.monotonic() - held.started > timeout_s:
                        _kill_group(proc.pid)
                        await proc.wait()
                        raise ApplicationError(
                            f"{target} did not finish within {timeout_s:.0f} s; child killed",
                            held(),
                            type="ChildTimeout",
                        )
            except asyncio.CancelledError:
                _kill_group(proc.pid)
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(proc.wait(), 10)
                raise
            finally:
                gone.cancel()
                # what the child's process group left running (Inductor's compile workers, a
                # daemon) dies with it; it would also hold stderr open and stall the reader
                _kill_group(proc.pid)
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(proc.wait(), 5)
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(reader, 5)
        # every attempt held the GPU: a retry after a killed worker charges both (the lost
        # one up to its last heartbeat, so at most one heartbeat interval is missed); the
        # time its child waited for the GPU's lease held none (``--gpu-slots``)
        spent = max(0.0, held() - _lease_wait(out_path))
        result = _exit_stage(
            _collect(target, proc.returncode, out_path, state, result_type, spent),
            out_path,
            exited,
        )
        if "device_seconds" in type(result).model_fields:
            result = result.model_copy(update={"device_seconds": spent})
        return result


async def _read_progress(proc: asyncio.subprocess.Process, state: dict[str, object]) -> None:
    tail: list[str] = state["tail"]  # type: ignore[assignment]
    assert_stream = proc.stderr
    if assert_stream is None:
        return
    async for raw in assert_stream:
        line = raw.decode("utf-8", "replace").rstrip("\n")
        if line.startswith(PROGRESS_PREFIX):
            with contextlib.suppress(json.JSONDecodeError):
                state["detail"] = json.loads(line[len(PROGRESS_PREFIX) :])
                if activity.in_activity():
                    activity.heartbeat(state["detail"], state["held"]())  # type: ignore[operator]
            continue
        tail.append(line)
        del tail[:-60]


async def _hand_job(
    proc: asyncio.subprocess.Process,
    target: str,
    in_path: Path,
    out_path: Path,
    env: dict[str, str],
) -> None:
    """The child's one job, through its stdin (a child that died meanwhile leaves no
    output, which ``_collect`` reports)."""
    job = {"target": target, "in": str(in_path), "out": str(out_path), "env": env}
    assert proc.stdin is not None
    with contextlib.suppress(ConnectionError):
        proc.stdin.write((json.dumps(job) + "\n").encode())
        await proc.stdin.drain()
    proc.stdin.close()


async def _exit_of(proc: asyncio.subprocess.Process) -> None:
    """The child's own exit.  ``proc.wait()`` also waits until every process holding the
    child's stderr has closed it, and Inductor's compile workers outlive their parent by
    seconds: activities on the H200 ran ~10 s past all their stages."""
    while proc.returncode is None:
        await asyncio.sleep(0.05)


def _exit_stage(result: M, out_path: Path, exited: float) -> M:
    """Add ``process_exit``: from the result being written to the process being gone."""
    seconds = max(0.0, exited - out_path.stat().st_mtime)
    return add_stages(result, {"process_exit": round(seconds, 3)})


def _lease_wait(out_path: Path) -> float:
    """Seconds the child reported waiting for the GPU's lease (0 when it did not say)."""
    try:
        return float(json.loads(out_path.read_text()).get("lease_wait_s") or 0.0)
    except (OSError, ValueError, TypeError):
        return 0.0


def _kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


def _collect(
    target: str,
    returncode: int | None,
    out_path: Path,
    state: dict[str, object],
    result_type: type[M],
    held_s: float,
) -> M:
    """The child's result, or its failure as an ``ApplicationError`` whose first detail is
    the GPU time the attempt held (``held_s``): a failed step is charged its run time, not
    the time it waited in the queue or for the lease (``workflows.machine_loss``)."""
    tail = "\n".join(state["tail"][-25:])  # type: ignore[index]
    if not out_path.is_file():
        how = f"signal {-returncode}" if returncode and returncode < 0 else f"exit {returncode}"
        raise ApplicationError(
            f"{target} child died ({how}) before reporting a result\n{tail}",
            held_s,
            type="ChildCrashed",
        )
    payload = json.loads(out_path.read_text())
    if payload.get("ok"):
        return result_type.model_validate(payload["result"])
    raise ApplicationError(
        f"{payload.get('error_type')}: {payload.get('message')}\n{payload.get('traceback', '')}",
        held_s,
        type=payload.get("error_type") or "ChildError",
        non_retryable=bool(payload.get("deterministic")),
    )
