"""A child's whole tree is stopped, even a helper that left its process group."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from gates.proctree import send, stop_tree

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
