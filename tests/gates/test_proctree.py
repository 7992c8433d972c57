"""A child's whole tree is stopped, even a helper that left its process group, and is seen
stopped before ``stop_tree`` returns."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from gates.proctree import send, stop_tree, wait_stopped

# the parent sleeps; its child leaves the process group (setsid) and counts into a file
SCRIPT = """
import os, sys, time
if os.fork() == 0:
    os.setsid()
    n = 0
    while True:
        n += 1
        if n % 1000 == 0:
            with open(sys.argv[1] + ".tmp", "w") as f:
                f.write(str(n))
            os.replace(sys.argv[1] + ".tmp", sys.argv[1])
else:
    time.sleep(60)
"""


BUSY = "while True: pass"


def _count(path: Path) -> int:
    return int(path.read_text())


def test_a_helper_that_left_the_process_group_is_stopped_with_the_tree(tmp_path: Path) -> None:
    counter = tmp_path / "count"
    proc = subprocess.Popen([sys.executable, "-c", SCRIPT, str(counter)], start_new_session=True)
    stopped: list[int] = []
    try:
        deadline = time.monotonic() + 20
        while not counter.exists() and time.monotonic() < deadline:
            time.sleep(0.01)
        stopped = stop_tree(proc.pid, [proc.pid])
        assert len(stopped) == 2 and stopped[0] == proc.pid
        assert os.getpgid(stopped[1]) != os.getpgid(proc.pid)  # a killpg would miss it
        before = _count(counter)
        time.sleep(0.3)
        assert _count(counter) == before
        send(stopped, signal.SIGCONT)
        time.sleep(0.3)
        assert _count(counter) > before
    finally:
        send(stopped or [proc.pid], signal.SIGKILL)
        proc.wait()


def _state(pid: int) -> str:
    text = Path(f"/proc/{pid}/stat").read_text()
    return text[text.rindex(")") + 2 :].split()[0]


def test_busy_processes_sharing_this_cpu_are_seen_stopped_when_stop_tree_returns() -> None:
    """On one CPU with this process, a SIGSTOPped sibling stays runnable until it is next
    scheduled; ``stop_tree`` returns only once each one reads as stopped."""
    cpu = min(os.sched_getaffinity(0))
    mine = os.sched_getaffinity(0)
    procs = [subprocess.Popen([sys.executable, "-c", BUSY]) for _ in range(4)]
    pids = [p.pid for p in procs]
    try:
        for pid in pids:
            os.sched_setaffinity(pid, {cpu})
        os.sched_setaffinity(0, {cpu})
        time.sleep(0.2)  # all of them running, taking turns on the CPU
        for _ in range(5):
            for pid in pids:
                assert stop_tree(pid, [pid]) == [pid]
            assert [_state(pid) for pid in pids] == ["T"] * len(pids)
            send(pids, signal.SIGCONT)
            time.sleep(0.02)
    finally:
        os.sched_setaffinity(0, mine)
        send(pids, signal.SIGKILL)
        for p in procs:
            p.wait()


def test_a_process_that_is_not_stopped_is_reported_after_the_wait() -> None:
    proc = subprocess.Popen([sys.executable, "-c", BUSY])
    try:
        assert not wait_stopped([proc.pid], wait_ns=20_000_000)
        send([proc.pid], signal.SIGSTOP)
        assert wait_stopped([proc.pid])
        proc.kill()
        proc.wait()
        assert wait_stopped([proc.pid])  # gone counts as stopped
    finally:
        proc.kill()
        proc.wait()
