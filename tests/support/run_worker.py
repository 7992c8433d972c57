"""A worker process for tests: ``python -m tests.support.run_worker cpu|gpu QUEUE``.

``cpu`` runs the real workflows and real CPU activities; ``gpu`` runs the GPU
activity doubles on the given queue (no CUDA needed).  Connection settings
come from the KERNELOPT_* environment, as for a production worker.  A test can
SIGKILL this process at any moment.
"""

from __future__ import annotations

import asyncio
import signal
import sys

from kernelopt.client import connect
from kernelopt.config import Settings
from kernelopt.log import configure


async def main(kind: str, queue: str) -> None:
    import worker

    configure(level="warning")
    client = await connect(Settings.from_env(), start_embedded=False)
    if kind == "cpu":
        w = worker.build_cpu_worker(client, queue)
    else:
        from tests.support.gpu_doubles import GPU_DOUBLES

        w = worker.build_gpu_worker(client, queue, activities=GPU_DOUBLES)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    async with w:
        sys.stdout.write("ready\n")
        sys.stdout.flush()
        await stop.wait()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
