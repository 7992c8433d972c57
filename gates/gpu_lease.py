"""Timed work has the GPU to itself; untimed GPU work may share it.

A GPU worker may run several activities at once (``kernelopt worker --gpu-slots``) so that
one candidate's compile and correctness runs overlap another's, but nothing may run on
the GPU while a candidate is timed.  Every section of gate code that puts work on the GPU
holds the GPU's lease: *shared* for work whose speed nobody reads (the reference,
correctness and float64 runs), *exclusive* for what is timed (gate 4's rounds, screening,
profiling, and any compile that autotunes: its picks are timings, kept in the caches).  A section's children end before it lets go, so
no process that ran candidate code is left to put work on the GPU during another's timing.

The lease is two ``flock(2)`` locks per GPU in the home's ``locks/`` folder, which the
sandbox does not show to candidates: the lease itself, and a turnstile that a waiting
exclusive section keeps, so that a stream of shared sections cannot starve the timing.
The kernel drops both when a process dies, so a killed gate never leaves the GPU held.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from kernelopt.config import Settings
from kernelopt.gpu_info import pinned_gpu

Mode = Literal["shared", "exclusive"]
MODES: tuple[Mode, ...] = ("shared", "exclusive")
LEASE_ENV = "KERNELOPT_GPU_LEASE"  # a supervised child's whole job holds the lease in this mode


def gpu_key() -> str:
    """The physical GPU this process is pinned to (a GPU worker sets it), as a file name."""
    return "".join(c if c.isalnum() or c in "-_" else "_" for c in pinned_gpu() or "0")


def pinned_to_gpu() -> bool:
    """Whether this process was pinned to a GPU (a GPU worker and its children are)."""
    return pinned_gpu() not in ("", "-1")


def lease_dir(home: Path | None = None) -> Path:
    folder = (home or Settings.from_env().home) / "locks"
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    return folder


_waits_lock = threading.Lock()
_waited = [0.0]  # seconds this process's sections spent waiting for the lease


def waited_s() -> float:
    """Seconds this process has waited for the lease: time its activity held no GPU, which
    the GPU-seconds it is charged leave out (``activities.supervise``)."""
    with _waits_lock:
        return _waited[0]


def _note_wait(seconds: float) -> None:
    with _waits_lock:
        _waited[0] += seconds


@dataclass
class Hold:
    """One section's hold on the lease."""

    mode: Mode
    _fds: list[int] = field(default_factory=list, repr=False)

    def release(self) -> None:
        for fd in self._fds:
            # unlocked first: a process forked meanwhile shares the open file, and closing
            # only our descriptor would leave the lock held for as long as it lives
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)
        self._fds.clear()


def acquire(mode: Mode, *, key: str | None = None, home: Path | None = None) -> Hold:
    """Block until this process may run ``mode`` work on the GPU; ``release()`` the hold.

    For a process that ends with its work (a supervised child, a gate section): one killed
    while it waits takes its wait with it.
    """
    turnstile, lease, started = _files(mode, key, home)
    try:
        fcntl.flock(turnstile, fcntl.LOCK_EX)  # behind any exclusive section already waiting
        fcntl.flock(lease, _LOCKS[mode])
    except BaseException:
        os.close(lease)
        os.close(turnstile)
        raise
    return _held_now(mode, turnstile, lease, started)


_LOCKS = {"shared": fcntl.LOCK_SH, "exclusive": fcntl.LOCK_EX}


def _paths(key: str | None, home: Path | None) -> tuple[Path, Path]:
    """The GPU's (turnstile, lease) files."""
    base = lease_dir(home) / f"gpu-{key or gpu_key()}"
    return base.with_suffix(".turnstile"), base.with_suffix(".lease")


def _files(mode: Mode, key: str | None, home: Path | None) -> tuple[int, int, float]:
    if mode not in MODES:
        raise ValueError(f"GPU lease mode {mode!r}: expected one of {MODES}")
    turnstile, lease = _paths(key, home)
    return _open(turnstile), _open(lease), time.monotonic()


def _held_now(mode: Mode, turnstile: int, lease: int, started: float) -> Hold:
    os.close(turnstile)  # the lease is ours: the next in line may queue for it
    _note_wait(time.monotonic() - started)
    return Hold(mode=mode, _fds=[lease])


def _open(path: Path) -> int:
    return os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)


_held = threading.local()  # this thread's sections: ``mode`` and ``hold`` now


def held_mode() -> Mode | None:
    """The mode this thread's sections hold now, if any."""
    return getattr(_held, "mode", None)


@contextlib.contextmanager
def _holding(hold: Hold | None, mode: Mode | None) -> Iterator[None]:
    before = (getattr(_held, "hold", None), held_mode())
    _held.hold, _held.mode = hold, mode
    try:
        yield
    finally:
        if hold is not None:
            hold.release()
        _held.hold, _held.mode = before


@contextlib.contextmanager
def gpu_section(mode: Mode, device: str, *, home: Path | None = None) -> Iterator[None]:
    """Hold the lease in ``mode`` for a section of gate code on ``device`` (nothing off the GPU).

    Sections nest: inside an exclusive one every section is covered, and a shared one
    inside a shared one adds nothing.  For timing inside a shared section use
    ``timed_section``, which lets the shared hold go first.
    """
    current = held_mode()
    if not device.startswith("cuda") or current == "exclusive" or current == mode:
        yield
        return
    if current == "shared":
        raise RuntimeError("an exclusive GPU section inside a shared one waits for itself")
    with _holding(acquire(mode, home=home), mode):
        yield


@contextlib.contextmanager
def timed_section(device: str, *, home: Path | None = None) -> Iterator[None]:
    """The GPU to this thread alone while it times (gate 4's rounds).

    Inside a shared section the hold is turned exclusive in place when this section is
    first in line, so a timing child prestarted under it (trusted code, building its
    baseline on the GPU) never runs beside another section's timing.  When another
    exclusive section already waits behind our shared hold, ours is let go first (two
    such waits would block each other) and exclusive taken as a new hold; a prestarted
    child of ours still building then overlaps that section's timing: noise its rounds
    see, never candidate code.
    """
    current = held_mode()
    if not device.startswith("cuda") or current == "exclusive":
        yield
        return
    if current != "shared":
        with _holding(acquire("exclusive", home=home), "exclusive"):
            yield
        return
    shared: Hold = _held.hold
    turnstile = _open(_paths(None, home)[0])
    try:
        fcntl.flock(turnstile, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(turnstile)
        shared.release()
        _held.hold, _held.mode = None, None
        with _holding(acquire("exclusive", home=home), "exclusive"):
            yield
        return
    started = time.monotonic()
    try:
        # new sections wait at the turnstile we hold, so the conversion has no gap for them
        fcntl.flock(shared._fds[0], fcntl.LOCK_EX)
    finally:
        os.close(turnstile)
        _note_wait(time.monotonic() - started)
    _held.mode = "exclusive"
    try:
        yield
    finally:
        fcntl.flock(shared._fds[0], fcntl.LOCK_SH)
        _held.mode = "shared"


@contextlib.contextmanager
def whole_job(mode: str | None, *, home: Path | None = None) -> Iterator[None]:
    """A supervised child's job under the lease ``mode`` names (``LEASE_ENV``); no lease when
    it names none (the job takes its own sections, or runs no GPU work) or this process
    is not pinned to a GPU."""
    if not mode or not pinned_to_gpu():
        yield
        return
    with _holding(acquire(mode, home=home), mode):  # type: ignore[arg-type]  # checked there
        yield
