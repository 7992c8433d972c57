"""A worker process for the durability tests: ``python -m tests.durability.worker_main cpu|gpu|gpu-real QUEUE``.

Like ``tests.support.run_worker`` (real workflows and CPU activities; GPU
activity doubles), plus what these tests need:

* the export workflow and its activities, registered when the shared
  registries (``workflows.all_workflows``, ``activities.cpu_activities``) do
  not list them yet;
* ``KERNELOPT_TEST_HEARTBEAT_S``: shorter heartbeat timeouts on every GPU call
  site, so a dead or stuck GPU worker is noticed in seconds instead of the
  production two minutes (the mechanism is the same, only the number moves).
  Changing a timeout does not change the commands a workflow issues, so
  histories recorded this way replay under the production settings.
* ``KERNELOPT_TEST_CPU_HEARTBEAT_S``: the same for the CPU call sites, with CPU
  bodies beating to match, so a killed CPU worker's activity is retried in
  seconds instead of the production 30.
* ``KERNELOPT_TEST_CPU_SLOW`` / ``KERNELOPT_TEST_CPU_MARKS``: slow CPU activity
  bodies, so a test can kill the CPU worker inside one (``slow_cpu.py``).
* ``KERNELOPT_TEST_EXECUTIONS``: a JSONL file of finished physical GPU
  executions (``executions.py``).
* kind ``gpu-real``: the real GPU activities instead of the doubles, counted
  the same way (the GPU host's random-fault test).
* ``KERNELOPT_TEST_WORKER_LOG``: the log level (default "warning").

A test can SIGKILL this process at any moment.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from datetime import timedelta

from tests.durability import slow_cpu
from tests.support.short_heartbeats import (
    CPU_HEARTBEAT_ENV,
    sandbox_seeing_the_patch,
    shorten_cpu_heartbeats,
    shorten_gpu_heartbeats,
)

GPU_HEARTBEAT_ENV = "KERNELOPT_TEST_HEARTBEAT_S"
# A workflow task for a cached campaign goes to the worker's sticky queue first; after a
# SIGKILL the server waits this long before handing it to the shared queue (the SDK's
# default: 10 s per killed CPU worker and campaign).  Expiry only means a full replay.
STICKY_S = 2.0
LOG_LEVEL_ENV = "KERNELOPT_TEST_WORKER_LOG"  # "info": the worker logs what it runs
REAL_GPU = "gpu-real"  # the kind that runs the real GPU activities (on a CUDA host)


def workflow_runner():
    """The production sandbox, or one that sees shortened heartbeats when they are set."""
    import worker

    if not (os.environ.get(GPU_HEARTBEAT_ENV) or os.environ.get(CPU_HEARTBEAT_ENV)):
        return worker.workflow_runner()
    return sandbox_seeing_the_patch(worker.workflow_runner())


def cpu_worker(client, queue: str):
    from temporalio.worker import Worker

    import worker
    from activities import cpu_activities
    from activities.audit_activities import CPU_ACTIVITIES as audit_activities
    from workflows.export_campaign import ExportCampaign

    workflows = worker.workflows()
    if ExportCampaign not in workflows:
        workflows.append(ExportCampaign)
    activities = cpu_activities()
    registered = {getattr(a, "__temporal_activity_definition").name for a in activities}
    activities += [
        a
        for a in audit_activities
        if getattr(a, "__temporal_activity_definition").name not in registered
    ]
    return Worker(
        client,
        task_queue=queue,
        workflows=workflows,
        activities=activities,
        workflow_runner=workflow_runner(),
        max_concurrent_activities=16,
        sticky_queue_schedule_to_start_timeout=timedelta(seconds=STICKY_S),
        graceful_shutdown_timeout=worker.GRACEFUL_SHUTDOWN,
    )


async def real_gpu_worker(client, queue: str):
    """The production GPU worker (``worker.start_gpu_worker``: its GPU pinned, its own
    compiler caches, reference bundles, shared zygote and spare children) with each real
    GPU activity counted; (worker, zygote)."""
    import worker
    from activities import gpu_activities
    from kernelopt.config import Settings
    from tests.durability.executions import counted

    settings = Settings.from_env()
    index, _ = worker.prepare_gpu_worker(settings, None)
    counted_activities = [counted(a) for a in gpu_activities()]
    return await worker.start_gpu_worker(client, settings, index, queue, counted_activities)


async def main(kind: str, queue: str) -> None:
    import worker
    from kernelopt.client import connect
    from kernelopt.config import Settings
    from kernelopt.log import configure

    heartbeat = os.environ.get(GPU_HEARTBEAT_ENV)
    if heartbeat:
        shorten_gpu_heartbeats(float(heartbeat))
    cpu_heartbeat = os.environ.get(CPU_HEARTBEAT_ENV)
    if cpu_heartbeat:
        shorten_cpu_heartbeats(float(cpu_heartbeat))
    configure(level=os.environ.get(LOG_LEVEL_ENV, "warning"))
    slow_cpu.install()
    # a worker restarted just before the next server kill must outwait the server's downtime
    # (up to 3 s, then its start), as a supervised worker would be started again
    client = await connect(Settings.from_env(), start_embedded=False, retries=8)
    zygote = None
    if kind == "cpu":
        w = cpu_worker(client, queue)
    elif kind == REAL_GPU:
        w, zygote = await real_gpu_worker(client, queue)
    else:
        from tests.durability.executions import counted
        from tests.support.gpu_doubles import GPU_DOUBLES

        # counted inside the product's memoized (build_gpu_worker): physical runs only
        w = worker.build_gpu_worker(client, queue, activities=[counted(a) for a in GPU_DOUBLES])
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    try:
        async with w:
            sys.stdout.write("ready\n")
            sys.stdout.flush()
            await stop.wait()
    finally:
        if zygote is not None:
            zygote.close()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
