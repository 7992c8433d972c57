"""A worker process for tests: ``python -m tests.support.run_worker cpu|gpu QUEUE [--heartbeat-s S]``.

``cpu`` runs the real workflows and real CPU activities; ``gpu`` runs the GPU
activity doubles on the given queue (no CUDA needed) behind the real
``worker.build_gpu_worker``, so concurrency limits under test are the
product's.  Connection settings come from the KERNELOPT_* environment, as for
a production worker.  ``--heartbeat-s S`` (cpu) gives the workflows' GPU calls
a short heartbeat timeout (``tests/support/short_heartbeats.py``).  Once
polling, it prints ``identity=<pid>@<host>`` (the identity Temporal records for
it) and ``ready``.  A test can SIGKILL this process at any moment.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import socket
import sys

from kernelopt.client import connect
from kernelopt.config import Settings
from kernelopt.log import configure
from tests.support.short_heartbeats import sandbox_seeing_the_patch, shorten_gpu_heartbeats


async def main(kind: str, queue: str, heartbeat_s: float | None = None) -> None:
    import worker

    configure(level="warning")
    if heartbeat_s is not None:
        shorten_gpu_heartbeats(heartbeat_s)
        product = worker.workflow_runner
        worker.workflow_runner = lambda: sandbox_seeing_the_patch(product())
    client = await connect(Settings.from_env(), start_embedded=False)
    if kind == "cpu":
        w = worker.build_cpu_worker(client, queue)
    else:
        from activities import spare_child
        from tests.support.gpu_doubles import GPU_DOUBLES

        w = worker.build_gpu_worker(client, queue, activities=GPU_DOUBLES)
        spare_child.enable()  # as a product GPU worker does: its next child starts ahead
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    async with w:
        sys.stdout.write(f"identity={os.getpid()}@{socket.gethostname()}\nready\n")
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
