"""The GPU's lease: timed sections run alone, untimed ones share, and no waiter starves.

Plain locks on files, so everything here runs on the CPU: a device named ``cuda:N`` only
decides that the sections take the lease.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from activities.supervise import run_supervised
from gates import gpu_lease
from gates.gpu_lease import acquire, gpu_section, held_mode, timed_section
from tests.support.paths import ROOT
from tests.support.timed_probe import NapIn, NapOut

GPU = "cuda:0"


@pytest.fixture(autouse=True)
def _home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("KERNELOPT_HOME", str(tmp_path))
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3")
    return tmp_path


def _in_thread(fn: Callable[[], None]) -> tuple[threading.Thread, threading.Event]:
    done = threading.Event()

    def run() -> None:
        fn()
        done.set()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, done


def test_shared_sections_overlap_and_a_timed_one_waits_for_them_and_goes_first() -> None:
    first, second = acquire("shared"), acquire("shared")  # untimed work shares
    order: list[str] = []
    timed_may_end = threading.Event()

    def timed() -> None:
        hold = acquire("exclusive")
        order.append("timed")
        timed_may_end.wait(10)
        hold.release()

    def late_shared() -> None:
        hold = acquire("shared")
        order.append("late shared")
        hold.release()

    _, timed_done = _in_thread(timed)
    time.sleep(0.3)  # the timed section is waiting now, and holds the turnstile
    _, late_done = _in_thread(late_shared)
    time.sleep(0.3)
    assert order == []  # neither runs beside the shared holders
    first.release()
    time.sleep(0.2)
    assert order == []
    second.release()
    assert _wait_for(lambda: order == ["timed"])
    time.sleep(0.3)
    assert order == ["timed"]  # the late shared section waits for the timing to end
    timed_may_end.set()
    assert timed_done.wait(5) and late_done.wait(5) and order == ["timed", "late shared"]


def test_a_dead_process_leaves_nothing_held(tmp_path: Path) -> None:
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import time; from gates.gpu_lease import acquire; acquire('exclusive'); "
            "print('held', flush=True); time.sleep(60)",
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        _, got = _in_thread(lambda: acquire("shared").release())
        assert not got.wait(0.5)  # another process is timing
        holder.kill()
        assert got.wait(5)  # the kernel dropped the killed process's lock
    finally:
        holder.kill()
        holder.wait()


def test_timing_inside_a_shared_section_turns_the_hold_exclusive_in_place() -> None:
    other = acquire("shared")
    converting = threading.Event()
    _, converted = _in_thread(lambda: _timed(GPU, converting))
    assert converting.wait(5) and not converted.wait(0.3)  # waits for the other holder only
    _, late = _in_thread(lambda: acquire("shared").release())
    assert not late.wait(0.3)  # no gap: a new section queues behind the conversion
    other.release()
    assert converted.wait(5) and late.wait(5)
    assert held_mode() is None


def _timed(device: str, converting: threading.Event) -> None:
    with gpu_section("shared", device):
        converting.set()
        with timed_section(device):
            assert held_mode() == "exclusive"
        assert held_mode() == "shared"


def test_two_shared_sections_that_both_start_timing_do_not_block_each_other() -> None:
    barrier = threading.Barrier(2)

    def gate() -> None:
        with gpu_section("shared", GPU):
            barrier.wait(5)  # both hold shared before either times
            with timed_section(GPU):
                time.sleep(0.1)

    threads = [_in_thread(gate) for _ in range(2)]
    assert all(done.wait(10) for _, done in threads)


def test_off_the_gpu_no_section_takes_the_lease() -> None:
    hold = acquire("exclusive")
    try:
        with gpu_section("shared", "cpu"), timed_section("cpu"):
            assert held_mode() is None
    finally:
        hold.release()


def test_an_exclusive_section_inside_a_shared_one_is_refused() -> None:
    with (
        gpu_section("shared", GPU),
        pytest.raises(RuntimeError, match="waits for itself"),
        gpu_section("exclusive", GPU),
    ):
        pass


async def test_a_supervised_job_with_a_lease_waits_for_the_timing_to_end() -> None:
    timing = acquire("exclusive")
    job = asyncio.create_task(
        run_supervised(
            "tests.support.timed_probe:nap",
            NapIn(seconds=0.1),
            NapOut,
            env={"PYTHONPATH": str(ROOT)},
            lease="shared",
        )
    )
    await asyncio.sleep(3.0)  # the child has started and waits for the lease
    assert not job.done()
    timing.release()
    out = await asyncio.wait_for(job, 60)
    assert out.napped == 0.1
    # the seconds it waited held no GPU: charged are its start, its nap and its exit only
    assert out.device_seconds is not None and 0.1 <= out.device_seconds < 2.5


def test_lease_files_live_in_the_home_out_of_the_sandbox(_home: Path) -> None:
    acquire("shared").release()
    assert {p.name for p in (_home / "locks").iterdir()} == {"gpu-3.lease", "gpu-3.turnstile"}
    assert gpu_lease.gpu_key() == "3"


def _wait_for(condition: Callable[[], bool], seconds: float = 5.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.02)
    return False


def test_a_process_forked_under_a_hold_does_not_keep_the_gpu_after_its_release() -> None:
    hold = acquire("exclusive")
    pid = os.fork()
    if pid == 0:  # a helper forked without exec (a compile pool, a daemon): it lingers
        time.sleep(3)
        os._exit(0)
    try:
        hold.release()
        _, got = _in_thread(lambda: acquire("shared").release())
        assert got.wait(1.0)  # not after the helper's three seconds
    finally:
        os.waitpid(pid, 0)
