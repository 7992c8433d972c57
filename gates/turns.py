"""A turn session: the baseline and the candidate in two live children that take turns.

``GateSettings.turn_pairs`` (off by default; gates/README.md, "Turns").  A
dispatch-bound forward is timed by the host clock, whose speed can move in
regimes shorter than a paired round; two sides timed seconds apart then
disagree by that much, two sides timed in alternating short batches share a
regime.  Candidate code must never share a process with the trusted baseline, so
here each side has a child of its own and the parent alternates them:

1. both start together; the baseline child builds and warms, then the
   candidate child (told ``start`` only then);
2. the parent pins both to one CPU; each in turn settles and takes its
   CUDA-event samples while the other is stopped (``gates.jobs.turn_side``);
3. calibration: the parent times baseline turns exactly as real ones, first at
   the count the baseline's own estimate gives, and sets one call count for
   both so that a baseline turn's window lasts about ``host_batch_ms``.  The
   parent's clock, because the window also holds the harness (rotating copies,
   seeding, the records), often several times the child's estimate, and a
   window longer than the host clock's regimes no longer cancels them.  The
   baseline's only: the candidate's numbers could shrink turns until their fixed
   overhead pulls every ratio towards 1.  These turns are in no ratio;
4. ``pairs`` pairs of turns in ABBA order: before each turn the baseline child
   waits out GPU work left queued (its idle probe), charged to the turn before.
   With ``probe_child`` (``GateSettings.turn_probe_child``) a third trusted child
   probes instead: the baseline's job, with no model built, started, sealed and
   its quiet latency measured once the baseline is warm, before any candidate
   code runs, pinned to the turns' CPU and stopped outside its probes.  Every
   turn, whichever side's, is then entered from and left to the same process;
   with the baseline probing, only a candidate turn pays a switch of process
   (and of GPU context) in its window and another in the probe charged to it;
   the turn's window is the parent's ``perf_counter_ns`` from before resuming
   the child to the moment its stop is acknowledged after ``done``.  Outside
   its turn a child and everything it started is SIGSTOPped
   (``gates.proctree``): the candidate cannot run while the baseline is timed,
   nor between turns;
5. the record phase: the child answers ``synced`` after its calls' final sync
   and ``done`` once every output is recorded; the parent notes when ``synced``
   arrives.  With ``record_credit`` (``GateSettings.turn_record_credit``, on by
   default) a side is charged its window minus the smaller of its own record
   phase and R, the median record phase of the baseline's turns in the
   session's other pairs: both turns of a pair get the same R, which neither's
   own record moves (a median that held the baseline's own record gave it more
   off than a candidate with the very same records).  The records are the
   harness's, not the model's, and would pull every ratio towards 1; only the
   baseline's (trusted code on outputs of the reference's structure) set what
   may be taken off, so a candidate that says ``synced`` early, with work still
   to do, is charged all of it beyond the baseline's record time;
6. ``end``: each child answers (also timed, charged to its last turn: a forged
   early ``done`` moves work into a later turn of its own, never out of the
   timing), then saves its checked calls and its result, one at a time.

A child that dies or does not answer in time fails the round, charged to the
side it happened in; the probe child's, to the baseline (trusted code only: an
infrastructure failure, never the candidate's fault).
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from gates.checked_calls import held_calls
from gates.go_signal import live_workdir
from gates.perfstats import median
from gates.placement import current_cpu
from gates.proctree import SignalFailed, TreeSignaller
from gates.protocol import TimingJob, TimingResult
from gates.runner import ChildOutcome, run_job
from gates.timers import calls_for
from gates.turn_channel import COMMANDS, REPLIES, LineReader, make_fifos

TURN_MS = 25.0  # a baseline turn lasts about this long: many regimes of the host
# clock last longer, so both turns of a pair usually share one
CALIBRATION_TURNS = 2  # the second at the first's count: a turn's fixed cost weighs less
_TURN_MIN_S = 10.0  # a turn's deadline: at least this, or many times its expected length
_TURN_FACTOR = 50.0


def turn_cpu() -> int:
    """The CPU both children of a session run on: the highest this process may use that it is
    not running on now.

    One CPU for both, so neither side gets a faster core or a core of its own for
    its helper threads; not the parent's, which wakes to read every ``done``; the
    highest, because the lowest CPUs take most of a host's housekeeping interrupts.
    """
    allowed = sorted(os.sched_getaffinity(0))
    mine = current_cpu()
    others = [c for c in allowed if c != mine]
    return (others or allowed)[-1]


class ChildLost(RuntimeError):
    """A turn child died, or did not answer in time."""

    def __init__(self, side: str, what: str) -> None:
        super().__init__(f"{side} child {what}")
        self.side = side


class TurnChild:
    """Parent side of one turn child: its FIFOs, its process tree and its outcome.

    The tree is stopped, resumed and pinned through the signaller ``run_job``
    hands over when the child starts (``gates.proctree.TreeSignaller``): host
    PIDs for a spawned child, the zygote's commands for a forked one.  The FIFOs
    are opened where the child sees them (a sandboxed zygote's stage); the
    baseline's are unlinked once it has opened them (``seal``), before any
    candidate code runs, so a forked candidate (which sees its siblings' stages)
    finds no channel of the baseline's to write into.
    """

    def __init__(self, job: TimingJob, workdir: Path, *, timeout_s: float, device: str) -> None:
        self.side = job.side
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        make_fifos(self.workdir)
        self._fds: list[int] = []
        self._fifos: list[Path] = [self.workdir / COMMANDS, self.workdir / REPLIES]
        self._commands = -1
        self._reader: LineReader | None = None
        self._tree: TreeSignaller | None = None
        self._started = threading.Event()
        self._seq = 0
        self._pool = ThreadPoolExecutor(1, thread_name_prefix=f"turns-{self.side}")
        self.future: Future[ChildOutcome] = self._pool.submit(
            run_job, job, self.workdir, timeout_s=timeout_s, device=device, on_start=self._on_start
        )

    def _on_start(self, tree: TreeSignaller) -> None:
        live = live_workdir(self.workdir)
        if live != self.workdir:
            self._fifos += [live / COMMANDS, live / REPLIES]
        self._commands = os.open(live / COMMANDS, os.O_RDWR | os.O_NONBLOCK)
        replies = os.open(live / REPLIES, os.O_RDWR | os.O_NONBLOCK)
        self._fds = [self._commands, replies]
        self._reader = LineReader(replies)
        self._tree = tree
        self._started.set()

    def alive(self) -> bool:
        return not self.future.done()

    @property
    def tree(self) -> TreeSignaller:
        if self._tree is None:
            self._started.wait(60.0)
        if self._tree is None:
            raise ChildLost(self.side, "never started")
        return self._tree

    @property
    def reader(self) -> LineReader:
        self.tree  # noqa: B018 (waits for the start)
        assert self._reader is not None
        return self._reader

    def seal(self) -> None:
        """Unlink the FIFOs: the child has opened both (it answered), the parent holds both."""
        for path in self._fifos:
            path.unlink(missing_ok=True)

    def command(self, word: str, arg: str = "") -> str:
        """Send ``word`` with a fresh sequence number (stale replies dropped first); the number."""
        reader = self.reader
        self._seq += 1
        reader.drain()
        os.write(self._commands, f"{word} {self._seq} {arg}\n".encode())
        return str(self._seq)

    def answer(self, word: str, seq: str | None, timeout_s: float) -> list[str]:
        """The child's ``word`` reply (to ``seq``), its fields after them; ChildLost otherwise.

        Other lines are skipped: they are not the answer to this command.
        """
        deadline = time.monotonic() + timeout_s
        reader = self.reader
        while True:
            line = reader.line(deadline, self.alive)
            if line is None:
                raise ChildLost(self.side, f"gave no {word!r} within {timeout_s:g} s")
            fields = line.split()
            if fields[:1] == [word] and (seq is None or fields[1:2] == [seq]):
                return fields[1 if seq is None else 2 :]

    def number(self, word: str, seq: str, timeout_s: float) -> float:
        """The first field of the ``word`` reply as a finite number (ChildLost if it is not)."""
        fields = self.answer(word, seq, timeout_s)
        try:
            value = float(fields[0])
        except (IndexError, ValueError):
            value = float("nan")
        if not value >= 0 or value == float("inf"):
            raise ChildLost(self.side, f"answered {word!r} with {fields[:1]}")
        return value

    def resume(self) -> None:
        self.tree.cont()

    def stop(self) -> int:
        """Stop the child's whole tree; ``perf_counter_ns`` when it is known stopped."""
        return self.tree.stop()

    def pin(self, cpu: int) -> None:
        self.tree.pin(cpu)

    def kill(self) -> None:
        if self._tree is not None:
            with contextlib.suppress(SignalFailed):
                self._tree.kill()

    def outcome(self) -> ChildOutcome:
        outcome = self.future.result()
        self._pool.shutdown()
        return outcome

    def close(self) -> None:
        for fd in self._fds:
            with contextlib.suppress(OSError):
                os.close(fd)
        self.seal()


@dataclass
class TurnRound:
    """What one turn session measured, or how it failed."""

    baseline: TimingResult | None = None
    candidate: TimingResult | None = None
    ratios: list[float] = field(default_factory=list)  # baseline turn / candidate turn, per pair
    calls: int = 0  # per turn, both sides: from the calibration
    calls_raw: int = 0  # what the baseline's own estimate gave, before the calibration
    calibration_ms: list[float] = field(default_factory=list)  # parent-timed, ms per call
    estimates_ms: dict[str, float] = field(default_factory=dict)  # each side's ``ready``
    cpu: int | None = None
    turns: list[tuple[str, float]] = field(default_factory=list)  # (side, ms per call), charged
    windows_ms: list[tuple[str, float]] = field(default_factory=list)  # (side, whole window)
    records_ms: list[float] = field(default_factory=list)  # each turn's record phase
    taken_off_ms: list[float] = field(default_factory=list)  # what each turn was not charged
    record_credit: bool = False  # record phases taken off (step 5), else whole windows
    probe_child: bool = False  # the idle probe ran in a third child (step 4), else the baseline's
    probe_waits_ms: list[float] = field(default_factory=list)  # charged to the turn before
    outcomes: dict[str, ChildOutcome] = field(default_factory=dict)
    failure: tuple[str, ChildOutcome] | None = None
    wall_s: float = 0.0  # the session's span: the device is held for it once
    phases_s: dict[str, float] = field(default_factory=dict)  # seconds from the start to each step
    started: float = field(default_factory=time.monotonic, repr=False)  # the session's start

    def mark(self, phase: str) -> None:
        """Note that ``phase`` ended now: where a session's span goes, step by step."""
        self.phases_s[phase] = round(time.monotonic() - self.started, 4)

    def side_turns(self, side: str) -> list[float]:
        return [ms for s, ms in self.turns if s == side]


Observer = Callable[[str, str], None]  # (side, "before" | "after") around each timed turn


@dataclass
class _Turn:
    """One turn as the parent's clock saw it."""

    side: str
    window_ns: int  # resume to the acknowledged stop, plus what is charged to it later
    record_ns: int  # ``synced`` to the acknowledged stop


class _Session:
    """The parent's part of one round: the order of turns and the clock."""

    def __init__(
        self,
        base: TurnChild,
        cand: TurnChild,
        out: TurnRound,
        observer: Observer | None,
        prober: TurnChild | None = None,
    ):
        self.base, self.cand, self.out, self.observer = base, cand, out, observer
        self.prober = prober  # the probe child (step 4), if any
        self.turns: list[_Turn] = []  # the timed ones, in order
        self.last: _Turn | None = None  # the latest, a calibration turn too

    def probe(self, timeout_s: float) -> int:
        """The idle wait in ns, the probe child's where there is one, else the baseline's: it is
        resumed for the probe and stopped after it."""
        child = self.prober or self.base
        child.resume()
        waited = int(child.number("probed", child.command("probe"), timeout_s))
        child.stop()
        return waited

    def charge(self, ns: int) -> None:
        """Add ``ns`` to the latest turn (the side whose work it was)."""
        if self.last is not None and ns > 0:
            self.last.window_ns += ns

    def turn(self, child: TurnChild, calls: int, timeout_s: float) -> None:
        """One timed turn of ``child``, with its record phase (from ``synced``)."""
        if self.observer is not None:
            self.observer(child.side, "before")
        self.turns.append(self.window(child, calls, timeout_s))
        if self.observer is not None:
            self.observer(child.side, "after")

    def window(self, child: TurnChild, calls: int, timeout_s: float) -> _Turn:
        """Resume ``child`` for ``calls`` calls; the turn as the parent's clock saw it."""
        t0 = time.perf_counter_ns()
        child.resume()
        seq = child.command("turn", str(calls))
        child.answer("synced", seq, timeout_s)
        synced = time.perf_counter_ns()
        child.answer("done", seq, timeout_s)
        t1 = child.stop()
        self.last = _Turn(child.side, t1 - t0, max(0, t1 - synced))
        return self.last

    def calibrate(self, calls: int, cpu: int, timeout_s: float) -> float:
        """A baseline turn of ``calls`` timed as every turn is (pinned, probed, its window,
        record phase included): the parent's ms per call.  In no ratio."""
        self.base.pin(cpu)
        self.probe(timeout_s)
        return self.window(self.base, calls, timeout_s).window_ns / 1e6 / calls

    def end(self, child: TurnChild, timeout_s: float) -> None:
        """Its ``end``, timed and charged to its last turn, then let it finish alone."""
        t0 = time.perf_counter_ns()
        child.resume()
        child.answer("ended", child.command("end"), timeout_s)
        elapsed = child.stop() - t0
        mine = [t for t in self.turns if t.side == child.side]
        if mine:
            mine[-1].window_ns += elapsed
        child.tree.release()
        self.out.outcomes[child.side] = child.outcome()

    def retire(self, prober: TurnChild, timeout_s: float) -> None:
        """The probe child's ``end``: untimed, charged to no side (it took no turn).  It is not
        stopped again: it exits at once, and a stop racing its exit would be refused."""
        prober.resume()
        prober.answer("ended", prober.command("end"), timeout_s)
        self.out.outcomes[prober.side] = prober.outcome()


def run_turn_round(
    baseline_job: TimingJob,
    candidate_job: TimingJob,
    workdir: Path,
    *,
    pairs: int,
    timeout_s: float,
    device: str,
    host_batch_ms: float = TURN_MS,
    observer: Observer | None = None,
    record_credit: bool = False,
    probe_child: bool = False,
) -> TurnRound:
    """One round as a turn session (module docstring); ``observer`` sees each turn's edges.

    ``record_credit`` takes each turn's record phase off as step 5 says
    (``GateSettings.turn_record_credit``); without it every window is charged whole.
    ``probe_child`` runs the idle probe in a third child, as step 4 says
    (``GateSettings.turn_probe_child``); without it the baseline's child probes.
    """
    if baseline_job.model.kind == "candidate" or not (baseline_job.turns and candidate_job.turns):
        raise ValueError("a turn session's baseline child runs trusted code, both as turn jobs")
    workdir = Path(workdir)
    out = TurnRound(record_credit=record_credit, probe_child=probe_child)
    children = {
        "baseline": TurnChild(
            baseline_job, workdir / "baseline", timeout_s=timeout_s * 2, device=device
        ),
        "candidate": TurnChild(
            candidate_job, workdir / "candidate", timeout_s=timeout_s * 2, device=device
        ),
    }
    if probe_child:
        # the baseline's job, trusted and naming no candidate; it builds nothing of it
        probe_job = baseline_job.model_copy(
            update={
                "side": "probe",
                "first_sight_sets": [],
                "baseline_first_sight_sets": [],
                "checks_file": "",
            }
        )
        children["probe"] = TurnChild(
            probe_job, workdir / "probe", timeout_s=timeout_s * 2, device=device
        )
    base, cand = children["baseline"], children["candidate"]
    session = _Session(base, cand, out, observer, children.get("probe"))
    try:
        # the outputs a turn may hold, from the trusted side's job (the same reference's)
        most = held_calls(baseline_job.expected, baseline_job.held_output_bytes)
        _run(session, pairs=pairs, timeout_s=timeout_s, host_batch_ms=host_batch_ms, most=most)
    except ChildLost as lost:
        for child in children.values():
            with contextlib.suppress(ChildLost):
                child.kill()
        for side, child in children.items():
            out.outcomes.setdefault(side, child.outcome())
        failed = out.outcomes[lost.side]
        if failed.ok:  # it finished on its own, outside the session: not an answer
            failed = dataclasses.replace(failed, status="crashed", message=str(lost))
        out.failure = (_blamed(lost.side), failed)
    except BaseException:
        for child in children.values():
            with contextlib.suppress(ChildLost):
                child.kill()
        raise
    finally:
        for child in children.values():
            child.close()
        out.mark("closed")
    # the device is held for the session's span, whichever child is on turn: two children
    # that live side by side are not twice the GPU time
    out.wall_s = time.monotonic() - out.started
    if out.failure is not None:
        return out
    for side in ("baseline", "candidate", "probe"):
        outcome = out.outcomes.get(side)
        if outcome is not None and (not outcome.ok or outcome.result is None):
            out.failure = (_blamed(side), outcome)
            return out
    _results(session)
    return out


def _blamed(side: str) -> str:
    """The side a child's failure is charged to: its own; the probe child's, the baseline's.

    The probe child runs trusted code only (the baseline's job, no model, no candidate),
    so its failure is the infrastructure's: charged as the baseline's (``perf_verdict``
    reads a baseline failure as an infrastructure error), never as a candidate fault.
    """
    return "baseline" if side == "probe" else side


def _run(
    session: _Session, *, pairs: int, timeout_s: float, host_batch_ms: float, most: int
) -> None:
    base, cand, prober, out = session.base, session.cand, session.prober, session.out
    base.answer("warmed", None, timeout_s)  # built and warm before any candidate code runs
    out.mark("baseline_warmed")
    if prober is not None:
        # its quiet latency is measured now, the baseline warm and waiting, no candidate code
        # yet; then it is stopped until its first probe and its channel sealed as the baseline's
        prober.command("start")
        prober.answer("warmed", None, timeout_s)
        prober.stop()
        prober.seal()
        out.mark("probe_warmed")
    base.seal()  # its channel is unreachable by path before any candidate code runs
    cand.command("start")
    cand.answer("warmed", None, timeout_s)
    out.mark("candidate_warmed")
    cand.stop()
    base.stop()
    out.cpu = turn_cpu()
    for child in (base, cand):  # settling and the events on the CPU the turns run on
        child.pin(out.cpu)
    if prober is not None:  # probes on that CPU too (trusted: its threads stay where put)
        prober.pin(out.cpu)
    session.probe(timeout_s)  # the candidate's warm-up may still occupy the GPU
    for child in (base, cand):
        child.resume()
        out.estimates_ms[child.side] = child.number("ready", child.command("prep"), timeout_s)
        child.stop()
    session.charge(session.probe(timeout_s))
    out.mark("prepared")
    _calibrate(session, host_batch_ms, timeout_s, most)
    out.mark("calibrated")
    slowest = max(*out.calibration_ms, *out.estimates_ms.values())
    turn_s = min(timeout_s, max(_TURN_MIN_S, _TURN_FACTOR * out.calls * slowest / 1000))
    for i in range(pairs):
        for child in (base, cand) if i % 2 == 0 else (cand, base):
            child.pin(out.cpu)  # again each turn: a side may have moved its threads
            waited = session.probe(turn_s)
            out.probe_waits_ms.append(waited / 1e6)
            session.charge(waited)
            session.turn(child, out.calls, turn_s)
    waited = session.probe(turn_s)
    out.probe_waits_ms.append(waited / 1e6)
    session.charge(waited)
    out.mark("paired")
    session.end(base, timeout_s)
    session.end(cand, timeout_s)
    if prober is not None:
        session.retire(prober, timeout_s)
    out.mark("ended")


def _calibrate(session: _Session, host_batch_ms: float, timeout_s: float, most: int) -> None:
    """Set ``calls`` from parent-timed baseline turns (step 3 of the module docstring), at
    most ``most`` (the outputs a turn may hold)."""
    out = session.out
    assert out.cpu is not None
    out.calls_raw = out.calls = calls_for(out.estimates_ms["baseline"], host_batch_ms, most)
    for _ in range(CALIBRATION_TURNS):
        out.calibration_ms.append(session.calibrate(out.calls, out.cpu, timeout_s))
        out.calls = calls_for(out.calibration_ms[-1], host_batch_ms, most)


def _charged(turns: list[_Turn], credit: bool) -> list[int]:
    """Each turn's record phase taken off, up to R, the median record phase of the baseline's
    turns in the other pairs (step 5); nothing without ``credit``.

    The i-th turn of each side makes pair i, and both turns of a pair face the same R,
    which neither turn's own record phase sets: a side whose record is long by chance
    gets no more off for it than the other side would.  One pair alone has no other
    pairs: nothing comes off."""
    if not credit:
        return [0] * len(turns)
    index = {"baseline": 0, "candidate": 0}
    pair_of: list[int] = []
    for t in turns:
        pair_of.append(index[t.side])
        index[t.side] += 1
    baseline = [
        (p, t.record_ns) for p, t in zip(pair_of, turns, strict=True) if t.side == "baseline"
    ]
    taken: list[int] = []
    for p, t in zip(pair_of, turns, strict=True):
        others = [ns for q, ns in baseline if q != p]
        allowance = median(others) if others else 0
        taken.append(int(min(t.record_ns, allowance)))
    return taken


def _results(session: _Session) -> None:
    """Each side's result with the parent's turns as its host numbers; the pairs' ratios."""
    out = session.out
    taken = _charged(session.turns, out.record_credit)
    out.windows_ms = [(t.side, t.window_ns / 1e6) for t in session.turns]
    out.records_ms = [t.record_ns / 1e6 for t in session.turns]
    out.taken_off_ms = [ns / 1e6 for ns in taken]
    out.turns = [
        (t.side, (t.window_ns - off) / 1e6 / out.calls)
        for t, off in zip(session.turns, taken, strict=True)
    ]
    for side in ("baseline", "candidate"):
        result = TimingResult.model_validate(out.outcomes[side].result)
        turns = out.side_turns(side)
        result = result.model_copy(
            update={
                "host_ms": median(turns),
                "host_samples": turns,
                "host_calls_per_batch": out.calls,
            }
        )
        setattr(out, side, result)
    base, cand = out.side_turns("baseline"), out.side_turns("candidate")
    out.ratios = [b / c for b, c in zip(base, cand, strict=True) if c > 0]
