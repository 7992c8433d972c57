"""Temporal workers for kernelopt (also ``kernelopt worker``).

``--queue cpu`` runs the workflows and the CPU activities (segmenting, LLM
calls, reports).  ``--queue gpu [--gpu N]`` runs the GPU activities for one
GPU: one process per GPU, one activity at a time unless ``--gpu-slots`` asks for
more (timed work never shares the GPU either way: ``gates/gpu_lease.py``), on a
task queue named by the GPU model (timings only compare on the same model).  Both
connect to any Temporal address/namespace and shut down gracefully on SIGTERM:
running activities are cancelled, their children killed, and Temporal hands the
work to another worker.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import signal
import socket
import sys
from collections.abc import Callable, Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any


def _tell_starter() -> None:
    """Tell ``kernelopt.local_workers`` that this process runs worker.py now.

    It waits for this byte (on the pipe it passed, named by ``KERNELOPT_WORKER_STARTED_FD``)
    before it counts the worker as running; written before the imports below, which take
    a second or more, and dropped from the environment so no child writes to that fd.
    """
    fd = os.environ.pop("KERNELOPT_WORKER_STARTED_FD", None)
    if fd is None:
        return
    with contextlib.suppress(OSError, ValueError):
        os.write(int(fd), b"1")
    with contextlib.suppress(OSError, ValueError):
        os.close(int(fd))


if __name__ == "__main__":
    _tell_starter()

from temporalio.client import Client
from temporalio.worker import Worker
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, SandboxRestrictions

from activities import spare_child
from kernelopt.compiler_caches import isolate_compiler_caches
from kernelopt.config import Settings
from kernelopt.contracts.names import gpu_queue_for
from kernelopt.errors import KernelOptError, NoGpuError
from kernelopt.gpu_busy import BusySampler, start_sampler
from kernelopt.gpu_info import gpu_names
from kernelopt.log import configure, get_logger

log = get_logger("kernelopt.worker")

GRACEFUL_SHUTDOWN = timedelta(seconds=30)


def workflow_runner() -> SandboxedWorkflowRunner:
    """The sandbox, with our pure contracts and pydantic passed through (loaded once)."""
    return SandboxedWorkflowRunner(
        restrictions=SandboxRestrictions.default.with_passthrough_modules(
            "kernelopt.contracts", "pydantic", "pydantic_core", "annotated_types"
        )
    )


def workflows() -> list[type]:
    from workflows import all_workflows

    return all_workflows()


def build_cpu_worker(
    client: Client,
    task_queue: str,
    activities: Sequence[Callable[..., Any]] | None = None,
    max_concurrent_activities: int = 16,
) -> Worker:
    """Workflows plus CPU activities."""
    if activities is None:
        from activities import cpu_activities

        activities = cpu_activities()
    return Worker(
        client,
        task_queue=task_queue,
        workflows=workflows(),
        activities=list(activities),
        workflow_runner=workflow_runner(),
        max_concurrent_activities=max_concurrent_activities,
        graceful_shutdown_timeout=GRACEFUL_SHUTDOWN,
    )


def build_gpu_worker(
    client: Client,
    task_queue: str,
    activities: Sequence[Callable[..., Any]] | None = None,
    busy: BusySampler | None = None,
    home: Path | None = None,
    slots: int = 1,
) -> Worker:
    """GPU activities only, ``slots`` at a time (one by default), each idempotent per call.

    With more than one slot, activities overlap only their untimed GPU work: every timed
    section takes the GPU alone through its lease (``gates.gpu_lease``).

    ``memoized``: a result is stored before its completion is reported, so an
    attempt Temporal runs again after losing that completion returns it at once.
    ``busy``: each activity that runs notes the GPU's utilisation for its
    campaign's report under ``home`` (issue 22 point 4).
    """
    from activities.idempotent import memoized

    if activities is None:
        from activities import gpu_activities

        activities = gpu_activities()
    if busy is not None:
        from activities.gpu_busy import sampled

        notes = home or Settings.from_env().home
        activities = [sampled(a, busy, notes) for a in activities]
    return Worker(
        client,
        task_queue=task_queue,
        activities=[memoized(a) for a in activities],
        max_concurrent_activities=slots,
        max_concurrent_workflow_tasks=1,
        graceful_shutdown_timeout=GRACEFUL_SHUTDOWN,
    )


def resolve_gpu(gpu: int | None) -> tuple[int, str]:
    """Pin this process to one GPU and return (index, model name); refuse without CUDA."""
    names = gpu_names()
    if not names:
        raise NoGpuError(
            "no CUDA GPU is visible on this machine: a GPU worker needs one "
            "(run `kernelopt worker --queue cpu` here and a GPU worker on a GPU host)"
        )
    index = 0 if gpu is None else gpu
    if index < 0 or index >= len(names):
        raise NoGpuError(f"GPU {index} does not exist; this machine has {len(names)} GPU(s)")
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    physical = visible.split(",")[index].strip() if visible else str(index)
    os.environ["CUDA_VISIBLE_DEVICES"] = physical
    return index, names[index]


def prepare_gpu_worker(settings: Settings, gpu: int | None) -> tuple[int, str]:
    """Pin the GPU and give this worker its own compiler caches (before any job starts)."""
    index, name = resolve_gpu(gpu)
    triton_dir, inductor_dir = isolate_compiler_caches(
        settings.compiler_caches_dir, socket.gethostname(), os.environ["CUDA_VISIBLE_DEVICES"]
    )
    log.info("compiler caches of this worker", triton=str(triton_dir), inductor=str(inductor_dir))
    return index, name


def _share_references(settings: Settings) -> None:
    """An empty directory where this worker's gate processes leave reference bundles for
    the next candidates of the same problem (``gates.reference_cache``)."""
    from gates.reference_cache import worker_reference_cache

    directory = worker_reference_cache(
        settings.home, socket.gethostname(), os.environ["CUDA_VISIBLE_DEVICES"]
    )
    log.info("shared reference bundles of this worker", directory=str(directory))


def _shared_zygote(settings: Settings, index: int) -> Any:
    """The zygote every gate job of this worker forks from (None: they spawn)."""
    if not settings.zygote:
        log.info("gate jobs spawn fresh interpreters (KERNELOPT_ZYGOTE=0)")
        return None
    from gates.zygote_service import start_for_worker

    return start_for_worker("cuda", f"gpu{index}")


async def start_gpu_worker(
    client: Client,
    settings: Settings,
    index: int,
    task_queue: str,
    activities: Sequence[Callable[..., Any]] | None = None,
    busy: BusySampler | None = None,
) -> tuple[Worker, Any]:
    """A prepared GPU worker's parts (after ``prepare_gpu_worker``): its reference-bundle
    folder, the Temporal worker, the gates' shared zygote and its spare children;
    (worker, zygote or None).  The fault tests' real GPU worker is built here too."""
    _share_references(settings)
    worker = build_gpu_worker(
        client, task_queue, activities, busy=busy, home=settings.home, slots=settings.gpu_slots
    )
    zygote = await asyncio.to_thread(_shared_zygote, settings, index)
    if settings.spare_child:
        spare_child.enable(settings.gpu_slots)
    return worker, zygote


async def run_worker(
    queue: str,
    gpu: int | None = None,
    settings: Settings | None = None,
    task_queue: str | None = None,
) -> None:
    """Connect and run one worker until SIGTERM/SIGINT."""
    from kernelopt.client import connect

    settings = settings or Settings.from_env()
    zygote = None
    busy = None
    if queue == "gpu":
        index, name = prepare_gpu_worker(settings, gpu)
        task_queue = task_queue or settings.gpu_queue or gpu_queue_for(name)
        client = await connect(settings)
        busy = start_sampler(os.environ["CUDA_VISIBLE_DEVICES"])
        worker, zygote = await start_gpu_worker(client, settings, index, task_queue, busy=busy)
        log.info("gpu worker ready", gpu=index, model=name, task_queue=task_queue)
    else:
        task_queue = task_queue or settings.cpu_queue
        client = await connect(settings)
        worker = build_cpu_worker(client, task_queue)
        log.info("cpu worker ready", task_queue=task_queue, address=settings.address)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(sig, stop.set)
    try:
        async with worker:
            await stop.wait()
            log.info("shutting down: cancelling running activities", task_queue=task_queue)
    finally:
        spare_child.disable()
        if zygote is not None:
            zygote.close()
        if busy is not None:
            busy.close()


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--queue", choices=["cpu", "gpu"], default="cpu")
    parser.add_argument("--gpu", type=int, default=None, help="GPU index (gpu queue)")
    parser.add_argument("--task-queue", default=None, help="override the task queue name")
    parser.add_argument("--address", default=None, help="Temporal address (host:port)")
    parser.add_argument("--namespace", default=None)
    parser.add_argument("--tls", action="store_true", default=None)
    parser.add_argument("--tls-cert", default=None)
    parser.add_argument("--tls-key", default=None)
    parser.add_argument("--tls-ca", default=None)
    parser.add_argument("--log-json", action="store_true", default=None)
    parser.add_argument(
        "--gpu-slots",
        type=int,
        default=None,
        help="GPU activities run at once (gpu queue; default 1): timed work still runs alone",
    )


def settings_from_args(args: argparse.Namespace) -> Settings:
    return Settings.from_env(
        temporal_address=getattr(args, "address", None),
        namespace=getattr(args, "namespace", None),
        tls=getattr(args, "tls", None),
        tls_cert=getattr(args, "tls_cert", None),
        tls_key=getattr(args, "tls_key", None),
        tls_ca=getattr(args, "tls_ca", None),
        log_json=getattr(args, "log_json", None),
        log_level=getattr(args, "log_level", None),
        gpu_slots=getattr(args, "gpu_slots", None),
    )


def run_from_args(args: argparse.Namespace) -> int:
    settings = settings_from_args(args)
    configure(json=settings.log_json, level=settings.log_level)
    try:
        asyncio.run(run_worker(args.queue, args.gpu, settings, args.task_queue))
    except KernelOptError as exc:
        log.error(str(exc))
        sys.stderr.write(f"kernelopt worker: {exc}\n")
        return 2
    # The SDK's native threads can abort interpreter finalisation after a clean
    # shutdown (seen as SIGABRT in PyGILState_Release); leave without it.
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="worker.py", description=__doc__.splitlines()[0])
    add_arguments(parser)
    return run_from_args(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
