"""First-sight sets: handed to a timing child only when a side has finished its samples.

The memo check (``gates.perf_verdict``) times each side once on input values it has
not seen, after its samples.  That only means something if the candidate could not
learn those values earlier: not from a file its sandbox shows (the inputs directory),
not from the process's heap while it warms up (a ``gc`` walk finds every loaded set),
not from gates 1-3 (which never see the sealed sets), and not from an earlier round
(each round's candidate side gets sealed sets of its own).  So the reference keeps the
candidate's first-sight sets out of every candidate view (``gates.reference.seal``),
and the parent copies a side's sets into the child's workdir when the side asks for
them, once (``Courier``); the child loads them, deletes the files and times its calls.

Both sides go through the same steps (a paired baseline gets the drawn sets, which
need no sealing: it is trusted code), so the load between samples and first-sight
calls costs both alike.  A candidate that forges the harness's request (it runs in the
same process) gets the sets early only by making the harness's own request a second
one, which the parent refuses, so the side fails; one that also suppresses that
request is written against this harness (gates/README.md, "Limits").
"""

from __future__ import annotations

import contextlib
import json
import shutil
import threading
import time
from collections.abc import Iterator
from pathlib import Path

from gates.go_signal import live_workdir
from gates.job_progress import job_file, mark
from gates.protocol import TimingJob
from kernelopt.log import get_logger

_LOG = get_logger(__name__)

FIRST_SIGHT_CALLS = 2  # first-sight calls per side and round (sealed sets per round)
FOLDER = "first_sight"  # in the child's workdir: one folder per side while it is handed over
ASK = "first_sight_ask"  # the progress mark that asks (after the side's tag)
_READY = "ready"  # written last: the side's files are complete
_REFUSED = "refused"  # the parent's answer to a second request
_POLL_S = 0.002


_REFUSAL = (
    "the parent refused this side's first-sight inputs: they were asked for before, or "
    "the progress marks were rewritten (something in the process asked early)"
)


class FirstSightRefused(RuntimeError):
    """The side's first-sight sets were not handed over: asked twice, or found early."""


def side_key(tag: str) -> str:
    """The folder of the side with progress tag ``tag`` ("base_" in a paired child)."""
    return tag.rstrip("_") or "model"


def receive(names: list[str], tag: str, timeout_s: float) -> list[Path]:
    """Child side: ask for the side's sets and wait for their files (the caller loads and
    deletes them).  Files there before the request mean someone asked already."""
    folder = job_file(FOLDER) / side_key(tag)
    if (folder / _REFUSED).is_file():
        raise FirstSightRefused(_REFUSAL)
    if folder.exists():
        raise FirstSightRefused(
            "first-sight inputs were in the workdir before this side asked for them "
            "(something in the process asked early)"
        )
    mark(f"{tag}{ASK}", sets=len(names))
    deadline = time.monotonic() + timeout_s
    while not (folder / _READY).is_file():
        if (folder / _REFUSED).is_file():
            raise FirstSightRefused(_REFUSAL)
        if time.monotonic() > deadline:
            raise FirstSightRefused(f"no first-sight inputs came within {timeout_s:g} s")
        time.sleep(_POLL_S)
    return [folder / f"{name}.pt" for name in names]


def forget(tag: str) -> None:
    """Child side: the side's handed-over files, deleted once loaded."""
    shutil.rmtree(job_file(FOLDER) / side_key(tag), ignore_errors=True)


class Courier:
    """Parent side: watches a timing child's progress marks and hands each side its
    first-sight files on its request, once; a second request is refused."""

    def __init__(self, job: TimingJob, workdir: Path) -> None:
        self.workdir = Path(workdir)
        self.sides = {"model": list(job.first_sight_sets)}
        if job.baseline is not None:
            self.sides["base"] = list(job.baseline_first_sight_sets)
        sealed = Path(job.sealed_dir) if job.sealed_dir else None
        self.sources: dict[str, Path] = {}
        for name in {n for names in self.sides.values() for n in names}:
            kept = sealed / f"{name}.pt" if sealed is not None else None
            self.sources[name] = (
                kept if kept is not None and kept.is_file() else Path(job.inputs_dir) / f"{name}.pt"
            )
        self.served: set[str] = set()
        self.problems: list[str] = []
        self._read: dict[Path, bytes] = {}  # each progress file's marks read so far
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="first-sight", daemon=True)

    def __enter__(self) -> Courier:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=10.0)

    def _run(self) -> None:
        while not self._stop.wait(_POLL_S):
            for phase in self._new_phases():
                if phase.endswith(ASK):
                    self._serve(side_key(phase[: -len(ASK)]))

    def _new_phases(self) -> list[str]:
        """The marks added since the last look; the ones read before must still be there."""
        path = live_workdir(self.workdir) / "progress.jsonl"
        if self._read and path not in self._read:
            # the staged workdir was copied back when the child ended: its marks, again
            return []
        seen = self._read.get(path, b"")
        try:
            data = path.read_bytes()
        except OSError:
            return []
        if not data.startswith(seen):
            self._refuse_all("the progress marks were rewritten while the child ran")
            return []
        complete = data[len(seen) : data.rfind(b"\n") + 1]
        if not complete:
            return []
        self._read[path] = seen + complete
        phases = []
        for line in complete.splitlines():
            try:
                phases.append(str(json.loads(line)["phase"]))
            except (ValueError, KeyError, TypeError):  # the child's marks are JSON objects
                self._refuse_all("the progress marks were rewritten while the child ran")
        return phases

    def _refuse_all(self, problem: str) -> None:
        """Marks were tampered with: a request may have been hidden, so no side is served."""
        if problem not in self.problems:
            self.problems.append(problem)
            _LOG.warning("first_sight.tampered", problem=problem, workdir=str(self.workdir))
        self.served.update(self.sides)
        for side in self.sides:
            folder = live_workdir(self.workdir) / FOLDER / side
            folder.mkdir(parents=True, exist_ok=True)
            (folder / _REFUSED).touch()

    def _serve(self, side: str) -> None:
        folder = live_workdir(self.workdir) / FOLDER / side
        folder.mkdir(parents=True, exist_ok=True)
        if side in self.served or side not in self.sides:
            self.problems.append(
                f"{side}: asked again" if side in self.served else f"{side}: no such side"
            )
            (folder / _REFUSED).touch()
            _LOG.warning("first_sight.refused", side=side, workdir=str(self.workdir))
            return
        self.served.add(side)
        for name in self.sides[side]:
            shutil.copyfile(self.sources[name], folder / f"{name}.pt")
        (folder / _READY).touch()


@contextlib.contextmanager
def courier_for(job: object, workdir: Path) -> Iterator[Courier | None]:
    """A courier for a timing job with first-sight sets while its child runs; else none."""
    if not isinstance(job, TimingJob) or not (
        job.first_sight_sets or job.baseline_first_sight_sets
    ):
        yield None
        return
    with Courier(job, workdir) as courier:
        yield courier
