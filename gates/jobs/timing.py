"""Timing child: the baseline, then the candidate, timed in one fresh process.

The baseline (trusted code) is built and timed first; its objects are then
dropped, Dynamo is reset and its freed memory poisoned before the candidate
is imported, so the candidate meets a process as clean as a fresh one and
cannot touch the baseline while it is timed (a job without ``baseline``
times one side, as a probe or warm-up does).

``TimerKit`` is created before the model -- and so before any candidate
code -- is imported.  After build and warm-up, anything the candidate
replaced is reported and put back before timing; after timing it is checked
again (patching *during* the timed calls).  Every call, warm-up included,
goes through ``CheckedLoop``: its inputs rotate over the reference's input
sets and its outputs are recorded for the parent to compare
(``gates.checked_calls``), so a timed call is always a checked call.  Both
sides are timed through the same loop.  A random or stateful forward is
seeded and has its state restored before each call, outside the events (and
subtracted from the host batches), as the reference's policy says.
"""

from __future__ import annotations

import gc
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from gates import first_sight
from gates.call_policy import CallPreparer, by_index, load_policy, state_left
from gates.checked_calls import CheckedCalls, RotatingInputs, held_calls
from gates.go_signal import wait_for_go
from gates.harness_watch import listed
from gates.job_progress import job_file
from gates.job_progress import mark as child_mark
from gates.jobs.build import build_callable
from gates.perfstats import median, spread
from gates.placement import cpu_node, current_cpu, gpu_node, pci_address
from gates.poison import poison_cached_blocks
from gates.problem_io import flatten_output, load_values, set_path, to_device
from gates.protocol import ModelSource, SideEffects, TimingJob, TimingResult
from gates.timers import (  # the kit: created in run() before the candidate is imported
    TimerKit,
    excused_switches,
)
from kernelopt.precision import strict_fp32

JOB_TYPE = TimingJob

_WARM_CALLS = 3
_BUSY_WARM_NS = 250_000_000
_BUSY_FIRST_SIGHT_NS = 50_000_000  # after the first-sight sets' load, before their calls
# the CPU's: a process just back from waiting for the sets ran its first tiny calls
# hundreds of times slower than its samples on a loaded CI host
_BUSY_FIRST_SIGHT_CPU_NS = 20_000_000
_FIRST_SIGHT_WAIT_S = 60.0  # the parent hands them over within milliseconds
# torch's intra-op threads in a CPU timing child (``cpu_threads``)
_CPU_TIMING_THREADS = 1
_SETTLE_CHUNK_MS = 25.0  # one short do_bench per settling step
_SETTLE_AGREE = 0.05  # the last three steps' medians agree this well: steady
_SETTLE_MAX_S = 3.0  # a forward that never settles is timed anyway (gate 4 sees the spread)
_SETTLE_MIN_CALLS = 3  # a step's median is never taken over fewer calls, however capped
_L2_FLUSH_BYTES = 256 * 1024 * 1024  # written before each timed call, as do_bench does
# about 0.25 ms at the H200's clock: more than a forward's dispatch, which do_bench's
# loop hides by running ahead of the GPU (a checked loop cannot run ahead)
_COVER_CYCLES = 500_000
_CPU_BUDGET_MS = 2000.0  # beyond this the CPU's checked loop makes the fewest calls


def cpu_threads(device: str) -> None:
    """On the CPU, run torch's intra-op work on this thread alone: on a loaded host an
    OpenMP region waits at its barrier for a descheduled worker, and a 5-us forward took
    4-50 ms a call for whole stretches (a side's samples, or its first-sight calls only),
    which the memo check read as memoisation."""
    if not device.startswith("cuda"):
        torch.set_num_threads(_CPU_TIMING_THREADS)


def settle(kit: TimerKit, time_chunk: Callable[[], list[float]]) -> list[float]:
    """Short checked timings until three in a row agree; their medians, for the record.

    A fresh process timing a launch-bound forward is slow for its first
    hundred milliseconds or so, and a fixed warm-up is either too short for
    that or wasted on steady forwards (docs/TEAM_NOTES.md, fourth session), so
    gate 4's one measurement waits for the forward to settle (bounded).  CPU
    timing only exercises the plumbing in tests, so it skips this.
    """
    steps: list[float] = []
    deadline = kit.now_ns() + int(_SETTLE_MAX_S * 1e9)
    while kit.now_ns() < deadline:
        steps.append(median(time_chunk()))
        last = steps[-3:]
        if len(last) == 3 and spread(last) <= _SETTLE_AGREE:
            break
    return steps


class CheckedLoop:
    """The only way the timing child calls the model: rotated inputs, checked outputs.

    ``timed(n)`` times each call alone (CUDA events around the call only, L2
    flushed before it, as ``triton.testing.do_bench`` does; the host clock on
    the CPU); the copy of new input values and the output samples happen
    outside the events, and a call's check is queued before the next flush;
    the flush and a GPU spin keep the device busy while the timed call is
    queued, so the events time the call's GPU work, as do_bench's do once it
    runs ahead (dispatch-bound candidates are caught by the host timer).
    ``host_batch(n)`` times ``n`` back-to-back calls, each on new input values,
    between device-wide synchronisations and checks their outputs afterwards.
    """

    def __init__(
        self,
        kit: TimerKit,
        fn: Callable[..., Any],
        rotation: RotatingInputs,
        checks: CheckedCalls,
        effects: SideEffects | None = None,
    ) -> None:
        self.kit, self.fn, self.rotation, self.checks = kit, fn, rotation, checks
        self.effects = effects or SideEffects()
        self._flush: torch.Tensor | None = None
        self.dispatch_ns: list[int] = []  # host time of each call in the latest timed()
        self.first_sight_dispatch_ns: list[int] = []  # the same, of the first-sight calls
        self.batches: list[tuple[float, float]] = []  # (copies, raw) ms of each host batch

    def untimed(self, n: int) -> None:
        for _ in range(n):
            k, args = self.rotation.next()
            self.checks.before(k)
            out = self.fn(*args)
            self._record(self._answer(out, args), k, args)

    def _answer(self, out: Any, args: list[Any]) -> Any:
        """The call's outputs, then the values its side effects left (the inputs it wrote in
        place, the module entries it updated), held as the batches hold outputs: a timed
        call is checked on everything the reference's call changes."""
        if not self.effects:
            return out
        left = [args[k] for k in self.effects.inputs] + state_left(self.fn, self.effects.state)
        return self.checks.hold((*flatten_output(out), *left))

    def _held(self, out: Any, args: list[Any]) -> Any:
        """What a batch keeps of a call until its records (``CheckedCalls.hold``)."""
        return self._answer(out, args) if self.effects else self.checks.hold(out)

    def _look(self) -> None:
        """Between a call's return and its record: the records' code must be the harness's
        (``RecordGuard``); a replaced piece is put back and fails the call."""
        replaced = self.kit.records.tampered(self.checks, self.rotation, self)
        if replaced:
            self.kit.records.restore(self.checks, self.rotation, self)
        if replaced and not self.checks.problems:  # the first is enough to fail the side
            reason = "the candidate changed the checker's own code or torch's state while it ran"
            self.checks.problems.append((self.checks.calls, f"{reason}: {listed(replaced)}"))

    def _record(self, out: Any, k: int, args: list[Any]) -> None:
        """Record a call's answer (``_answer``: its outputs and side effects)."""
        self._look()
        self.checks.record(out, k, args)

    def _record_batch(self, outs: list[tuple[Any, int, list[Any]]]) -> None:
        self._look()
        self.checks.record_batch(outs)

    def first_sight(self, value_sets: list[list[Any]], first_index: int) -> list[float]:
        """Each of ``value_sets`` once, timed as ``timed`` times a call (set indices from
        ``first_index``): values the side has not been given before, which a memo of
        earlier inputs cannot answer (``perf_verdict``'s memo check compares these with
        the samples)."""
        samples_dispatch = self.dispatch_ns  # the host batches' floor stays the samples'
        given = iter(enumerate(value_sets, start=first_index))

        def pick() -> tuple[int, list[Any]]:
            return self.rotation.give(*next(given))

        try:
            return self.timed(len(value_sets), pick)
        finally:
            self.first_sight_dispatch_ns = self.dispatch_ns if self.kit.cuda else []
            self.dispatch_ns = samples_dispatch

    def timed(self, n: int, pick: Callable[[], tuple[int, list[Any]]] | None = None) -> list[float]:
        kit, pick = self.kit, pick or self.rotation.next
        if not kit.cuda:
            samples = []
            for _ in range(n):
                k, args = pick()
                self.checks.before(k)  # seed / restore state: off the clock
                t0 = kit.now_ns()
                out = self.fn(*args)
                samples.append((kit.now_ns() - t0) / 1e6)
                self._record(self._answer(out, args), k, args)
            return samples
        if self._flush is None:
            self._flush = torch.empty(_L2_FLUSH_BYTES // 4, dtype=torch.int32, device="cuda")
        self.dispatch_ns = []
        pairs = []
        pending: tuple[Any, int, list[Any]] | None = None
        for _ in range(n):
            k, args = pick()
            if pending is not None:  # the previous call's check, before the flush is queued
                self._record(*pending)
                pending = None
            self.checks.before(k)  # seed / restore state: before the flush, off the events
            # The flush and a short spin keep the GPU busy while this thread queues the
            # timed call: with the checks' host work above, the GPU would otherwise wait at
            # `start` for the call's launches, and the events would time the dispatch.
            self._flush.zero_()
            kit.cover(_COVER_CYCLES)
            start, end = kit.event(), kit.event()
            start.record()
            d0 = kit.now_ns()
            out = self.fn(*args)
            self.dispatch_ns.append(kit.now_ns() - d0)
            end.record()
            pending = (self._answer(out, args), k, args)
            del out
            pairs.append((start, end))
        if pending is not None:
            self._record(*pending)
        kit.sync()
        return [float(s.elapsed_time(e)) for s, e in pairs]

    def host_batch(self, n: int) -> float:
        """Mean ms per call of ``n`` back-to-back calls, each on new input values.

        Every call gets another set's values, as every timed call does: a batch on
        unchanged buffers would let a memo keyed on pointer and version counter (or a
        candidate that recognises back-to-back calls) return a right answer without the
        work.  The copies are the harness's, so the same ``n`` copies alone, timed just
        before, are taken off; the per-call dispatch seen in the checked loop (a CPU
        time the GPU cannot shorten) is a floor, so a slower copy batch cannot hide it.
        """
        copies_ms = self._copies_ms(n)
        outs: list[tuple[Any, int, list[Any]]] = []
        prepared_ns = 0  # host time spent seeding / restoring between calls: not the model's
        self.kit.sync()
        t0 = self.kit.now_ns()
        for _ in range(n):
            k, args = self.rotation.next()
            if self.checks.prepare is not None:
                p0 = self.kit.now_ns()
                self.checks.before(k)
                prepared_ns += self.kit.now_ns() - p0
            outs.append((self._held(self.fn(*args), args), k, args))
        self.kit.sync()
        batch_ms = (self.kit.now_ns() - t0 - prepared_ns) / 1e6 / n
        self.batches.append((copies_ms, batch_ms))
        self._record_batch(outs)  # positions drawn now, after the batch's last call
        floor = min(self.dispatch_ms(), batch_ms) if self.dispatch_ns else 0.0
        return max(batch_ms - copies_ms, floor)

    def turn(self, n: int, synced: Callable[[], None] | None = None) -> float:
        """``n`` back-to-back calls on new values, synchronised and checked: one turn.

        What a host batch does, timed by the parent of a turn child
        (``gates.turns``): the outputs are recorded before the child says done, so
        work that fills an output late (a thread, another stream) is either inside
        the parent's window or caught as a wrong call.  ``synced`` runs between the
        final sync and the records, so the parent can see where the record phase
        starts (it takes off at most the baseline's own record time).  The copies
        stay inside too, the same on both sides.  Returns this process's own ms per
        call, a diagnostic.
        """
        outs: list[tuple[Any, int, list[Any]]] = []
        self.kit.sync()
        t0 = self.kit.now_ns()
        for _ in range(n):
            k, args = self.rotation.next()
            self.checks.before(k)
            outs.append((self._held(self.fn(*args), args), k, args))
        self.kit.sync()
        ms = (self.kit.now_ns() - t0) / 1e6 / n
        if synced is not None:
            synced()
        self._record_batch(outs)  # positions drawn now, after the turn's last call
        return ms

    def _copies_ms(self, n: int) -> float:
        """Mean ms of one rotation's copies alone, back to back: the batch's own overhead."""
        self.kit.sync()
        t0 = self.kit.now_ns()
        for _ in range(n):
            self.rotation.next()
        self.kit.sync()
        return (self.kit.now_ns() - t0) / 1e6 / n

    def dispatch_ms(self) -> float:
        """Median host time to issue one checked call (the GPU kept busy meanwhile)."""
        return median(self.dispatch_ns) / 1e6 if self.dispatch_ns else 0.0


def graph_replay_ms(
    kit: TimerKit, call: Callable[[], None], warmup_ms: float, rep_ms: float
) -> tuple[float | None, str]:
    """The forward's GPU time without dispatch: its kernels replayed from one CUDA graph.

    What the paper's "faster per kernel" means (ncu kernel durations), cheaply:
    the gap between this and the dispatched forward is launch and Python
    overhead.  Runs last in the child; a forward that cannot be captured (a
    sync, a host read) gives None and a note, not a failure.  Its outputs are
    not checked: this number can only reject a candidate (``dispatch_overhead``).
    """
    try:
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):  # warm-up off the default stream, as capture wants
            call()
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            call()
        kit.sync()
        return median(kit.event_samples(graph.replay, warmup_ms, rep_ms)), ""
    except Exception as exc:  # a verdict's note, never the child's failure
        return None, f"no CUDA-graph time: {type(exc).__name__}: {exc}"[:300]


def _counts(estimate_ms: float, budget_ms: float, low: int, high: int) -> int:
    if not math.isfinite(estimate_ms) or estimate_ms <= 0:
        return high
    return int(min(high, max(low, math.ceil(budget_ms / estimate_ms))))


def step_calls(gpu_ms: float, wall_ms: float, wall_cap_ms: float, high: int) -> int:
    """Calls in one settling step: 25 ms of the forward's GPU time, and with ``wall_cap_ms``
    (``GateSettings.settle_step_wall_ms``) at most that much wall time.

    A checked call's wall time is its GPU work plus the L2 flush, the cover spin
    and the checks: for a ~20 us forward that is ~15x the GPU time, so a step
    sized by GPU time alone is ~1,000 calls and a third of a second of wall.
    ``wall_ms`` is the wall time of one checked call as just measured; every
    step keeps at least ``_SETTLE_MIN_CALLS`` calls, as before.
    """
    calls = _counts(gpu_ms, _SETTLE_CHUNK_MS, _SETTLE_MIN_CALLS, high)
    if wall_cap_ms <= 0 or not math.isfinite(wall_ms) or wall_ms <= 0:
        return calls
    return max(_SETTLE_MIN_CALLS, min(calls, math.ceil(wall_cap_ms / wall_ms)))


class WallSizedSteps:
    """Settling steps whose size follows the wall time of the calls just made.

    Each step times its calls and sizes the next one from them (``step_calls``),
    so a step lasts about ``wall_cap_ms`` however fast the forward is; without
    a cap the size stays what the first estimate gave, as it always was.
    """

    def __init__(
        self,
        kit: TimerKit,
        timed: Callable[[int], list[float]],
        calls: int,
        wall_cap_ms: float,
        high: int,
    ) -> None:
        self.kit, self.timed, self.calls = kit, timed, calls
        self.wall_cap_ms, self.high = wall_cap_ms, high
        self.sizes: list[int] = []

    def __call__(self) -> list[float]:
        t0 = self.kit.now_ns()
        samples = self.timed(self.calls)
        self.sizes.append(self.calls)
        if self.wall_cap_ms > 0 and samples:
            wall_ms = (self.kit.now_ns() - t0) / 1e6 / len(samples)
            self.calls = step_calls(median(samples), wall_ms, self.wall_cap_ms, self.high)
        return samples


def run(job: TimingJob) -> TimingResult:
    """Time ``job.baseline`` first when given (before any candidate code exists here), then
    ``job.model``: one fresh process per round instead of one per side (gates/README.md)."""
    # what exists now (torch, the harness) is never garbage: later collections, the one
    # between the sides included, scan only what the models made (0.3 s less each)
    gc.freeze()
    strict_fp32()  # before the kit: it snapshots these switches as the honest state
    cpu_threads(job.device)  # before either side is built
    kit = TimerKit(job.device)
    if job.turns or job.side == "probe":
        raise ValueError("a turn child runs gates.jobs.turn_side, not this job")
    if job.go_digest and job.baseline is None:
        raise ValueError("only a paired child waits for go: its baseline is built first")
    baseline: bytes = b""
    if job.baseline is not None:
        import torch._inductor.config as inductor_config

        # a random forward's compiled baseline switches this on (jobs/build.py)
        fallback_random = inductor_config.fallback_random
        child_mark("baseline")
        # kept as immutable bytes: candidate code that finds it (gc, frames) cannot edit it
        timed = _time_side(kit, job, job.baseline, "baseline", tag="base_")
        baseline = timed.model_dump_json().encode()
        del timed
        child_mark("base_forget")
        _forget_side(job.device, compiled=job.baseline.kind == "compiled")
        inductor_config.fallback_random = fallback_random  # the candidate's, as in gate 2
        child_mark("candidate")
    result = _time_side(kit, job, job.model, job.side, checks_file=job.checks_file)
    if not baseline:
        return result
    return result.model_copy(update={"baseline": TimingResult.model_validate_json(baseline)})


def _forget_side(device: str, *, compiled: bool) -> None:
    """Leave nothing of the side just timed for the next one to find.

    The next side is candidate code: no object of the baseline may be
    reachable (gc), Dynamo starts afresh as in a new process, and memory the
    baseline's outputs lived in is poisoned before it is handed back, so
    recycled memory holds no answer (``gates.poison``).
    """
    gc.collect()
    if compiled:  # its graphs and guards go too
        torch._dynamo.reset()
        gc.collect()
    if device.startswith("cuda"):
        free = [
            int(block["size"])
            for segment in torch.cuda.memory_snapshot()
            for block in segment.get("blocks", [])
            if block.get("state") == "inactive"
        ]
        poison_cached_blocks(free, device)
        torch.cuda.empty_cache()


def _time_side(
    kit: TimerKit,
    job: TimingJob,
    src: ModelSource,
    side: str,
    *,
    tag: str = "",
    checks_file: str = "",
) -> TimingResult:
    """One side's build, warm-up, settling, event samples and host batches, all checked.

    ``tag`` prefixes its progress phases (the baseline's in a paired child), so
    a failure is charged to the side it happened in; ``checks_file`` receives
    its recorded calls for the parent to compare.  A turn child
    (``gates.jobs.turn_side``) shares every part but the host batches.
    """
    with torch.no_grad():
        timed = build_side(kit, job, src, tag=tag)
        settle_and_sample(kit, job, timed)
        timed.mark("time_host")
        slow = timed.slow
        most = held_calls(job.expected, job.held_output_bytes)
        calls = 1 if slow else kit.calls_for(timed.event_ms, job.host_batch_ms, most)
        host = [timed.loop.host_batch(calls) for _ in range(1 if slow else job.host_batches)]
        timed.cpus.append(current_cpu())
        return finish_side(kit, job, timed, side, host=host, calls=calls, checks_file=checks_file)


@dataclass
class TimedSide:
    """One side between its phases: built and warm, then settled and sampled, then finished."""

    fn: Callable[..., Any]
    rotation: RotatingInputs
    checks: CheckedCalls
    loop: CheckedLoop
    mark: Callable[..., None]
    cuda: bool
    tag: str = ""  # its progress phases' prefix ("base_": a paired child's baseline)
    first_sight_sets: list[str] = field(default_factory=list)  # asked for after the samples
    warm_seconds: float = 0.0
    tampered_before: list[str] = field(default_factory=list)
    cpus: list[int | None] = field(default_factory=list)
    settled: list[float] = field(default_factory=list)
    samples: list[float] = field(default_factory=list)
    first_sight: list[float] = field(default_factory=list)
    event_ms: float = float("nan")
    slow: bool = False  # the CPU's slow forward: the fewest calls


def build_side(kit: TimerKit, job: TimingJob, src: ModelSource, *, tag: str = "") -> TimedSide:
    """Build ``src``, load the rotating inputs and warm it up, every call checked (no grad)."""
    cuda = job.device.startswith("cuda")

    def mark(phase: str, **detail: object) -> None:
        child_mark(f"{tag}{phase}", **detail)

    t_start = kit.now_ns()
    kit.watch_loaded()  # the harness modules the other side's build loaded: still ours
    fn, _info = build_callable(src, job.device, job.model_seed, job.inputs_dir, on_phase=mark)
    if job.go_digest and tag == "base_":
        # prestarted (GateSettings.prestart_timing): the trusted baseline is built while
        # gates 1-3 run; no call of it (a first call may autotune, which a busy GPU
        # would skew), no input and no candidate until they have passed
        mark("wait_go")
        wait_for_go(job.go_digest, job.go_timeout_s)
        mark("inputs")
        t_start = kit.now_ns()
    names = job.input_sets or [job.input_set]
    rotation = RotatingInputs(
        [to_device(load_values(set_path(job.inputs_dir, n)), job.device) for n in names]
    )
    once = job.baseline_first_sight_sets if tag == "base_" else job.first_sight_sets
    checks = CheckedCalls(expected=list(job.expected), device=job.device, samples=job.check_samples)
    policy = load_policy(job.inputs_dir)
    prepare = CallPreparer(policy, fn)
    if prepare.active:  # random or stateful forward: every call as the reference's
        checks.prepare = by_index(prepare, [*names, *once])
    loop = CheckedLoop(kit, fn, rotation, checks, job.effects)
    mark("warm")
    loop.untimed(_WARM_CALLS)  # compile / autotune / JIT happen here, untimed
    kit.sync()
    # Then keep the GPU and this CPU busy a while: clocks ramp up after the idle gap
    # between fresh processes, and a launch-bound forward times that ramp otherwise.
    busy_until = kit.now_ns() + (_BUSY_WARM_NS if cuda else 0)
    while kit.now_ns() < busy_until:
        loop.untimed(1)
    kit.sync()
    side = TimedSide(fn, rotation, checks, loop, mark, cuda, tag=tag, first_sight_sets=list(once))
    side.warm_seconds = (kit.now_ns() - t_start) / 1e9
    side.tampered_before = excused_switches(
        kit.tampered(checks, loop, rotation), policy.problem_switches
    )
    kit.restore(checks, loop, rotation)
    return side


def settle_and_sample(kit: TimerKit, job: TimingJob, side: TimedSide) -> None:
    """Settle (CUDA), warm the events and take the checked event samples into ``side``.

    A turn side with ``turn_prep_calls`` skips the settling steps and caps its events'
    warm-up and samples at that many calls: the parent's turns are its host numbers.
    """
    loop, cuda = side.loop, side.cuda
    brief = job.turns and job.turn_prep_calls > 0
    most = min(job.max_rep_calls, job.turn_prep_calls) if brief else job.max_rep_calls
    side.mark("settle")
    side.cpus.append(current_cpu())
    t0 = kit.now_ns()
    estimate = median(loop.timed(3))
    wall_ms = (kit.now_ns() - t0) / 1e6 / 3
    cap = job.settle_wall_ms
    chunk = step_calls(estimate, wall_ms, cap, most)
    steps = WallSizedSteps(kit, loop.timed, chunk, cap, most)
    side.settled = settle(kit, steps) if cuda and not brief else []
    if side.settled:
        estimate = side.settled[-1]
    side.mark("time_events")
    # the CPU (Triton interpreter) only exercises the checked loop: a slow forward
    # there gets a few calls, not minutes of them
    side.slow = not cuda and estimate * job.min_rep_calls > _CPU_BUDGET_MS
    warm = _counts(estimate, job.warmup_ms, 1, most)
    if side.settled and cap > 0:  # settled: one more step's worth of the same calls warms enough
        warm = min(warm, steps.calls)
    loop.timed(warm)
    least = 3 if side.slow else min(job.min_rep_calls, most)
    side.samples = loop.timed(_counts(estimate, job.rep_ms, least, most))
    side.event_ms = median(side.samples)
    side.first_sight = first_sight_calls(kit, job, side)
    side.cpus.append(current_cpu())


def first_sight_calls(kit: TimerKit, job: TimingJob, side: TimedSide) -> list[float]:
    """Ask for the side's first-sight sets now, after its samples (``gates.first_sight``),
    and time one call on each; the device is kept busy a moment first, on rotation calls,
    so the wait and the load leave neither the GPU's clocks low nor this process cold."""
    names = side.first_sight_sets
    if not names:
        return []
    side.mark("first_sight")
    paths = first_sight.receive(names, side.tag, _FIRST_SIGHT_WAIT_S)
    values = [to_device(load_values(p), job.device) for p in paths]
    first_sight.forget(side.tag)
    busy_until = kit.now_ns() + (_BUSY_FIRST_SIGHT_NS if side.cuda else _BUSY_FIRST_SIGHT_CPU_NS)
    while kit.now_ns() < busy_until:
        side.loop.untimed(1)
    return side.loop.first_sight(values, len(side.rotation.sources))


def finish_side(
    kit: TimerKit,
    job: TimingJob,
    side: TimedSide,
    name: str,
    *,
    host: list[float],
    calls: int,
    checks_file: str = "",
    turn_ms: list[float] | None = None,
) -> TimingResult:
    """Check the timers again, save the recorded calls, time the CUDA graph: the result."""
    cuda, loop = side.cuda, side.loop
    in_use = (side.checks, side.loop, side.rotation)
    tampered_after = kit.tampered(*in_use)
    kit.restore(*in_use)
    side.mark("save_checks")
    if checks_file:
        side.checks.save(job_file(checks_file))
    graph_ms, graph_note = (None, "")
    if job.graph_replay and cuda and not tampered_after:
        side.mark("time_graph")
        _, args = side.rotation.next()
        fn = side.fn

        def call() -> None:
            fn(*args)

        graph_ms, graph_note = graph_replay_ms(kit, call, job.warmup_ms, job.rep_ms)
    cpus = side.cpus
    return TimingResult(
        side=name,
        event_ms=side.event_ms if cuda else None,
        event_samples=side.samples[:400],
        first_sight_samples=side.first_sight,
        dispatch_ms=loop.dispatch_ms() if cuda else None,
        first_sight_dispatch_ms=[ns / 1e6 for ns in loop.first_sight_dispatch_ns],
        host_ms=median(host),
        host_samples=host,
        host_calls_per_batch=calls,
        host_copies_ms=[round(c, 5) for c, _ in loop.batches],
        host_raw_ms=[round(r, 5) for _, r in loop.batches],
        tampered_before=side.tampered_before,
        tampered_after=tampered_after,
        warm_seconds=side.warm_seconds,
        settle_ms=side.settled,
        graph_ms=graph_ms,
        graph_note=graph_note,
        device_name=torch.cuda.get_device_name() if cuda else "cpu",
        cpus=cpus,
        cpu_nodes=[cpu_node(c) for c in cpus],
        gpu_node=gpu_node(pci_address(torch.cuda.get_device_properties())) if cuda else None,
        checked_calls=side.checks.calls,
        turn_ms=turn_ms or [],
    )
