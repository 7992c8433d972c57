"""A worker process for the scale-out tests: ``python -m tests.deploy.scale_worker cpu|gpu QUEUE``.

``cpu``: the real workflows and CPU activities (``worker.build_cpu_worker``).
``gpu``: the GPU activity doubles (``tests/support/gpu_doubles.py``) behind the
real ``worker.build_gpu_worker`` -- so the concurrency limit under test is the
product's, not the test's.  Connection settings come from ``KERNELOPT_*`` like
a production worker's.

``--heartbeat-s S`` (cpu only) shortens the heartbeat timeout the workflows
give GPU activities (2 minutes in production, ``workflows/activity_options.py``)
so a test sees a killed worker's activity handed over in seconds instead of
minutes (``tests/support/short_heartbeats.py``).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import socket
import sys

from tests.support.short_heartbeats import sandbox_seeing_the_patch, shorten_gpu_heartbeats


async def main(kind: str, queue: str, heartbeat_s: float | None) -> None:
    import worker
    from kernelopt.client import connect
    from kernelopt.config import Settings
    from kernelopt.log import configure

    configure(level="warning")
    if heartbeat_s is not None:
        shorten_gpu_heartbeats(heartbeat_s)
        product = worker.workflow_runner
        worker.workflow_runner = lambda: sandbox_seeing_the_patch(product())
    client = await connect(Settings.from_env(), start_embedded=False)
    if kind == "cpu":
        w = worker.build_cpu_worker(client, queue)
    else:
        from tests.support.gpu_doubles import GPU_DOUBLES

        w = worker.build_gpu_worker(client, queue, activities=GPU_DOUBLES)
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    async with w:
        # the identity Temporal records for this worker (pending activities show it)
        sys.stdout.write(f"ready identity={os.getpid()}@{socket.gethostname()}\n")
        sys.stdout.flush()
        await stop.wait()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("kind", choices=["cpu", "gpu"])
    parser.add_argument("queue")
    parser.add_argument("--heartbeat-s", type=float, default=None)
    args = parser.parse_args()
    asyncio.run(main(args.kind, args.queue, args.heartbeat_s))
    sys.stdout.flush()
    os._exit(0)  # skip finalisation: the core runtime's threads can abort it
