"""CPU rehearsal of tests/e2e/llm_campaign.py: the whole run, with a stand-in for the GPU worker.

    python -m tests.e2e.llm_rehearsal [--deadline S]   # from the repository root

Runs ``tests/e2e/llm_campaign.py`` unchanged (its own embedded Temporal server,
CPU worker and scripted LLM server) on shrunken copies of the problems, in a
private ``KERNELOPT_HOME`` on free ports, with a stand-in worker on the GPU
queue.  The stand-in serves compile / triage / profile / re-stitch / gate_model
with the test doubles of ``tests/support/gpu_doubles.py`` (the H200 wrapper
fixtures), and gate_candidate with the REAL gates 1-2 on the CPU under the
Triton interpreter.  What it cannot do is time anything: its per-candidate
"timings" are fixed stand-ins (1.0 ms baseline; 0.95 ms, or 3.0 ms for the
plan that says it is slower), so the numbers in the rehearsal's tables test
the plumbing, not the kernels.  Output goes to ``$OUT`` (default: a temp dir).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from temporalio import activity

from kernelopt.contracts import names
from kernelopt.contracts.verdicts import CandidateGateInput, CandidateGateResult
from tests.support.paths import ROOT

SLOW_MARK = 'plan "slower"'  # the slower modules' docstrings say so


@activity.defn(name=names.GATE_CANDIDATE)
async def gate_candidate_cpu(inp: CandidateGateInput) -> CandidateGateResult:
    """The real gates 1-2 on the CPU; stand-in timings (the interpreter's time means nothing)."""
    from gates.campaign import gate_candidate
    from kernelopt.store import open_store

    store = open_store()
    cpu = inp.model_copy(
        update={
            "settings": inp.settings.model_copy(update={"device": "cpu"}),
            "measure_kernel_speedup": False,
        }
    )
    task = asyncio.ensure_future(asyncio.to_thread(gate_candidate, cpu, store))
    while not task.done():
        activity.heartbeat()
        await asyncio.wait({task}, timeout=5)
    result = task.result()
    if not result.passed:
        return result
    slow = SLOW_MARK in store.get_text(inp.source)
    return result.model_copy(update={"baseline_kernel_ms": 1.0, "kernel_ms": 3.0 if slow else 0.95})


async def gpu_stand_in(queue: str) -> None:
    import worker
    from kernelopt.client import connect
    from kernelopt.config import Settings
    from kernelopt.log import configure
    from tests.support.gpu_doubles import GPU_DOUBLES, gate_candidate_double

    configure(level="warning")
    client = await connect(Settings.from_env(), start_embedded=False)
    acts = [a for a in GPU_DOUBLES if a is not gate_candidate_double] + [gate_candidate_cpu]
    w = worker.build_gpu_worker(client, queue, activities=acts)
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    async with w:
        print("ready", flush=True)
        await stop.wait()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def rehearse(deadline: float, extra: list[str], split_at: float | None = None) -> int:
    from kernelopt.campaigns import default_gpu_queue
    from kernelopt.config import Settings
    from kernelopt.temporal_server import EmbeddedServer
    from tests.e2e import llm_campaign as e2e

    tmp = Path(tempfile.mkdtemp(prefix="llm-e2e-rehearsal-"))
    os.environ["KERNELOPT_HOME"] = str(tmp / "home")
    os.environ["KERNELOPT_SERVER_PORT"] = str(_free_port())
    os.environ["KERNELOPT_UI_PORT"] = str(_free_port())
    os.environ.setdefault("OUT", str(tmp / "out"))
    settings = Settings.from_env()
    copies = [
        str(e2e.small_copy(e2e.ProblemScript.load(p), tmp / "problems"))
        for p in e2e.DEFAULT_PROBLEMS
    ]
    server = EmbeddedServer(settings)
    print(server.start().describe(), flush=True)
    queue = default_gpu_queue(settings)
    log = tmp / "gpu-stand-in.log"
    with log.open("w") as handle:
        stand_in = subprocess.Popen(
            [sys.executable, "-m", "tests.e2e.llm_rehearsal", "--gpu-stand-in", queue],
            stdout=handle,
            stderr=subprocess.STDOUT,
            cwd=ROOT,
        )
    try:
        limit = time.monotonic() + 60
        while "ready" not in log.read_text() and time.monotonic() < limit:
            if stand_in.poll() is not None:
                break
            time.sleep(0.5)
        if "ready" not in log.read_text():
            print(f"the GPU stand-in did not start; see {log}")
            return 1
        print(f"GPU stand-in on {queue} (pid {stand_in.pid}); OUT={os.environ['OUT']}", flush=True)
        started = time.monotonic()
        script = [sys.executable, "-m", "tests.e2e.llm_campaign", "--problems", *copies]
        if split_at is None:
            calls = [["--deadline", str(deadline)]]
        else:  # two device calls: stop mid-campaign, then resume on the same server
            calls = [
                ["--deadline", str(split_at), "--keep-workers"],
                ["--deadline", str(deadline - split_at), "--resume"],
            ]
        rc = 0
        for call in calls:
            rc = subprocess.call([*script, *call, *extra], cwd=ROOT)
            print(
                f"llm_campaign {' '.join(call)} exited {rc} after {time.monotonic() - started:.0f} s"
            )
        return rc
    finally:
        stand_in.send_signal(signal.SIGTERM)
        try:
            stand_in.wait(timeout=40)
        except subprocess.TimeoutExpired:
            stand_in.kill()
        server.stop()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--deadline", type=float, default=480.0)
    parser.add_argument(
        "--split-at",
        type=float,
        default=None,
        help="rehearse two device calls: --keep-workers until S seconds, then --resume",
    )
    parser.add_argument("--gpu-stand-in", metavar="QUEUE", help=argparse.SUPPRESS)
    args, extra = parser.parse_known_args()
    if args.gpu_stand_in:
        asyncio.run(gpu_stand_in(args.gpu_stand_in))
        return 0
    return rehearse(args.deadline, extra, args.split_at)


if __name__ == "__main__":
    sys.exit(main())
