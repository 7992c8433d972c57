"""``stop`` / ``cont`` / ``pin`` through a sandboxed zygote: real forked children, their helpers.

A turn session (``gates.turns``) stops the side off turn with every process it
started; for a child forked by a sandboxed zygote only the zygote can name
those processes, so it walks the tree itself.  The job here is a reference job
whose problem file (imported in the child) starts two counting helpers: one
that called ``setsid`` (still in the child's tree), and one orphaned into the
zygote (out of every child's tree), then blocks.
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from gates import proctree, zygote
from gates.go_signal import live_workdir
from gates.proctree import TreeSignaller
from gates.protocol import InputSet, ReferenceJob
from gates.runner import run_job
from gates.zygote import Zygote, ZygoteError

BASE = Path(__file__).resolve().parents[1] / "problems" / "gates" / "scale_one.py"
PROBLEM = """
import os, time

def _count(name):
    n = 0
    while True:
        n += 1
        if n % 1000 == 0:
            with open(name + ".tmp", "w") as f:
                f.write(str(n))
            os.replace(name + ".tmp", name)

if os.fork() == 0:  # left the process group, still the child's descendant
    os.setsid()
    with open("helper.pid", "w") as f:
        f.write(str(os.getpid()))
    _count("helper.count")
if os.fork() == 0:  # its parent exits at once: the zygote (a subreaper) adopts it
    if os.fork() == 0:
        os.setsid()
        _count("stray.count")
    os._exit(0)
time.sleep(120)
"""


def _count(path: Path) -> int:
    return int(path.read_text())


@pytest.fixture
def forked(cpu_zygote: Zygote | None, tmp_path: Path) -> Iterator[tuple[Zygote, int, Path]]:
    """(the zygote, its child's PID, the child's live workdir) with both helpers counting."""
    if cpu_zygote is None or not cpu_zygote.sandboxed:
        pytest.skip("needs the session's sandboxed CPU zygote")
    problem = tmp_path / "helpers.py"
    problem.write_text(BASE.read_text() + PROBLEM)  # a real problem: its checks come first
    job = ReferenceJob(
        device="cpu",
        inputs_dir=str(tmp_path / "inputs"),
        problem_path=str(problem),
        input_sets=[InputSet(name="s0", seed=1)],
        refs_dir=str(tmp_path / "refs"),
    )
    trees: list[TreeSignaller] = []
    workdir = tmp_path / "job"
    runner = threading.Thread(
        target=run_job,
        args=(job, workdir),
        kwargs={"timeout_s": 90.0, "device": "cpu", "via": cpu_zygote, "on_start": trees.append},
        daemon=True,
    )
    runner.start()
    deadline = time.monotonic() + 60
    live = workdir
    while time.monotonic() < deadline:
        live = live_workdir(workdir)
        if (live / "helper.count").is_file() and (live / "stray.count").is_file():
            break
        time.sleep(0.05)
    assert trees and (live / "stray.count").is_file(), "the helpers never counted"
    pid = trees[0].pid  # type: ignore[attr-defined]
    try:
        yield cpu_zygote, pid, live
    finally:
        cpu_zygote.kill(pid)
        runner.join(60)


def _moves(path: Path, within: float = 10.0) -> bool:
    """The counter advances within ``within`` seconds (a loaded machine may starve it a while)."""
    before = _count(path)
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        time.sleep(0.05)
        if _count(path) != before:
            return True
    return False


def _still(path: Path, seconds: float = 0.5, settle: float = 0.2) -> bool:
    """The counter does not advance for ``seconds``: its process is stopped.

    Read after ``settle``: SIGSTOP takes effect when the process next leaves the kernel, so
    a write or rename it was inside when stopped still completes (on a loaded machine, after
    the stop was acknowledged), and would read as a stopped process running on.
    """
    time.sleep(settle)
    before = _count(path)
    time.sleep(seconds)
    return _count(path) == before


def test_stop_through_the_zygote_holds_a_helper_that_called_setsid(
    forked: tuple[Zygote, int, Path],
) -> None:
    zygote, pid, live = forked
    helper = live / "helper.count"
    assert _moves(helper)
    zygote.stop(pid)  # returns once the zygote says it is done
    assert _still(helper)
    zygote.pin(pid, 0)
    assert _still(helper)  # pinning resumes nothing
    zygote.cont(pid)
    assert _moves(helper)


def test_an_orphan_the_zygote_adopted_is_stopped_and_never_resumed(
    forked: tuple[Zygote, int, Path],
) -> None:
    """It escaped every child's tree: no turn is its own, so it never runs again."""
    zygote, pid, live = forked
    stray = live / "stray.count"
    assert _moves(stray)
    zygote.stop(pid)
    assert _still(stray)
    zygote.cont(pid)
    assert _moves(live / "helper.count") and _still(stray)


def test_stop_of_a_process_that_is_not_the_zygotes_child_is_refused(
    forked: tuple[Zygote, int, Path],
) -> None:
    """The helper is the child's descendant, not the zygote's child: nothing is sent to it."""
    zygote, _, live = forked
    helper_pid = int((live / "helper.pid").read_text())
    with pytest.raises(ZygoteError, match="refused"):
        zygote.stop(helper_pid)
    with pytest.raises(ZygoteError, match="refused"):
        zygote.cont(helper_pid)
    assert _moves(live / "helper.count")


def test_a_missing_acknowledgement_is_an_error_not_a_pass(
    forked: tuple[Zygote, int, Path],
) -> None:
    """A zygote that does not answer in time: here it is frozen with all it started (a zero
    timeout raced its answer and sometimes lost)."""
    zygote, pid, _ = forked
    frozen = proctree.stop_tree(zygote._proc.pid, [zygote._proc.pid])
    try:
        with pytest.raises(ZygoteError, match="gave no 'stopped'"):
            zygote.stop(pid, timeout_s=0.5)
    finally:
        proctree.send(frozen, signal.SIGCONT)


def test_a_child_that_exited_is_no_error_to_stop_continue_or_pin(
    cpu_zygote: Zygote | None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A child can exit between answering its last command and the stop that follows; the
    refusal that then comes back means nothing is left to signal, not a failure.  A PID that
    never was its child is still refused (the test above)."""
    if cpu_zygote is None or not cpu_zygote.sandboxed:
        pytest.skip("needs the session's sandboxed CPU zygote")
    (tmp_path / "w").mkdir()
    (tmp_path / "w" / "job.json").write_text("{}")  # no job in it: the child exits at once
    pid = cpu_zygote.spawn(tmp_path / "w")
    assert cpu_zygote.wait(pid, 60) is not None
    cpu_zygote.stop(pid)
    cpu_zygote.pin(pid, 0)
    cpu_zygote.cont(pid, whole=True)
    # only the newest exits are remembered: a long-lived worker's zygote keeps no record of
    # every child it ever had, and an old one is a stranger again
    monkeypatch.setattr(zygote, "_GONE_KEPT", 1)
    (tmp_path / "w2").mkdir()
    (tmp_path / "w2" / "job.json").write_text("{}")
    newer = cpu_zygote.spawn(tmp_path / "w2")
    assert cpu_zygote.wait(newer, 60) is not None
    cpu_zygote.stop(newer)
    with pytest.raises(ZygoteError, match="not its child"):
        cpu_zygote.stop(pid)
