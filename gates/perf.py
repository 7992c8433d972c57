"""Gate 4 -- V_perf: baseline and candidate timed the same way, in fresh processes.

Each round is one fresh child that times the baseline and then the
candidate through the same checked loop; the baseline is timed before the
candidate is imported (it cannot reach the baseline's numbers while they
are made), and the baseline's objects and memory are gone when it is
(``gates.jobs.timing``).  Rounds repeat until each side's per-round medians
agree within ``spread_target`` (the spread is then known) or ``max_rounds``
is reached, and up to ``noisy_rounds`` more while the noise could still flip
the category (``noisy_undecided``); a first round far outside the gamma band decides alone
(``decided_by_one_round``).  With ``GateSettings.turn_pairs`` each round is a turn
session instead (``gates.turns``: a baseline child and a candidate child take
alternating turns timed by this process) and the pairs' ratios decide
(``perfstats.turn_decision``).  Every timed call is checked (gates/checked_calls.py):
a wrong output in any of them ends the measurement.  Then, in order:

0. a timed call returned a wrong output     -> FAIL (naming the call)
1. the candidate replaced a timer             -> FAIL (reported, honest numbers kept)
2. CUDA events and the host timer disagree   -> QUARANTINE (work off the timed stream)
3. faster than the data-movement roofline    -> QUARANTINE (re-time before trusting)
4. spread still above ``noise_limit`` and    -> QUARANTINE (timing not trustworthy)
   large enough to flip the category
   (a win the host clock decides is first scaled by ``order_control``'s A/A rounds)
5. category: optimized / matched -> PASS, slower -> FAIL (fallback to the baseline)
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial, wraps
from pathlib import Path
from typing import Any, Protocol

from gates.feedback import TAMPERED_INPUTS_FEEDBACK, crash_feedback
from gates.gpu_contention import OtherWork, other_work, wait_for_quiet
from gates.gpu_lease import timed_section
from gates.perfstats import (
    TimerAgreement,
    decide_category,
    iqr_rel,
    median,
    noisy_undecided,
    paired_ratios,
    rounds_sufficient,
    timers_agree,
    turn_decision,
    turns_sufficient,
)
from gates.prestart import PrestartedRound
from gates.protocol import ModelSource, OutputLeaf, TimingJob, TimingResult
from gates.reference import checked_if_cut
from gates.runner import ChildOutcome, run_job
from gates.timed_checks import TimedCheck
from gates.turns import TurnRound, run_turn_round
from kernelopt.contracts.verdicts import (
    GateName,
    GateSettings,
    GateStatus,
    GateVerdict,
    PerfCategory,
)
from kernelopt.roofline import ceilings_for, roofline_check


@dataclass
class PerfMeasurement:
    baseline: list[TimingResult] = field(default_factory=list)
    candidate: list[TimingResult] = field(default_factory=list)
    order: list[str] = field(default_factory=list)
    failure: tuple[str, ChildOutcome] | None = None  # (side, outcome) of a failed child
    seconds: float = 0.0
    phase_seconds: dict[str, float] = field(default_factory=dict)  # summed over the children
    inputs_tampered: list[str] = field(default_factory=list)  # files a candidate child changed
    checks: list[TimedCheck] = field(default_factory=list)  # one per candidate child
    wrong_output: TimedCheck | None = None  # the first candidate child whose calls failed
    prestarted: bool = False  # the first round's child was started during gates 1-3
    # A/A rounds (``order_control``): the baseline timed in both slots of a paired child
    control: list[TimingResult] = field(default_factory=list)
    other_work: OtherWork | None = None  # read only when the rounds stayed unstable
    quiet_waits: list[float] = field(default_factory=list)  # s waited before each round
    # turn sessions (GateSettings.turn_pairs): each round's pair ratios and how it ran
    turn_rounds: list[TurnRound] = field(default_factory=list)
    control_turns: list[TurnRound] = field(default_factory=list)  # A/A turn sessions

    def pair_ratios(self) -> list[list[float]]:
        """Each turn session's pair ratios (baseline turn over candidate turn), a list each."""
        return [list(r.ratios) for r in self.turn_rounds]

    @staticmethod
    def primary(r: TimingResult) -> float:
        """The gate's number: a call's real time, the larger of its GPU and its host time.

        The events time a call's GPU work alone (the GPU kept busy while it is queued); the
        host batch times back-to-back calls up to a device-wide sync, so it also sees
        dispatch and work on other streams.  A forward in a loop takes the longer of the
        two, as ``do_bench``'s loop sees it.  Without events, the per-call samples.
        """
        if r.event_ms is None:
            return median(r.event_samples)
        return max(r.event_ms, r.host_ms)


DISPATCH_BOUND = 1.2  # host time beyond this many times the GPU work: the verdict says so
CHECKS_FILE = "checks.pt"  # what a timing child recorded of its calls, in its workdir


@dataclass(frozen=True)
class TimingChecks:
    """How the timing children check every call: the sets, the structure, the comparison."""

    input_sets: list[str]
    expected: list[OutputLeaf]
    check: Callable[[Path], TimedCheck]


@dataclass(frozen=True)
class RooflineInputs:
    device_name: str
    bytes_in: int
    bytes_out: int
    flops: int | None


def side_phases(outcome: ChildOutcome) -> dict[str, float]:
    """A paired child's phase seconds keyed by the side they belong to.

    ``baseline.*`` holds the process's start-up (``outside``: fork or
    interpreter, CUDA, exit) and everything before the candidate's mark;
    ``candidate.*`` the rest, so the two add up to the child's wall time.
    """
    out: dict[str, float] = {}
    for key, value in outcome.phase_seconds("").items():
        phase = key[1:]
        if phase in ("outside", "load_job", "baseline") or phase.startswith("base_"):
            name = "baseline." + ("start" if phase == "baseline" else phase.removeprefix("base_"))
        else:
            name = "candidate." + ("start" if phase == "candidate" else phase)
        out[name] = round(out.get(name, 0.0) + value, 3)
    return out


@dataclass(frozen=True)
class RoundSetup:
    """What every paired timing child of one measurement shares: the reference's input
    files and first set, the settings, and how each timed call is checked."""

    inputs_dir: Path
    input_set: str
    settings: GateSettings
    checks: TimingChecks
    graph_replay: bool = False

    def job(
        self, first: ModelSource, second: ModelSource, *, graph_replay: bool = True
    ) -> TimingJob:
        """One round's paired job: ``first`` timed first, then ``second``, every call checked
        (``graph_replay=False`` leaves out the CUDA-graph time even where the setup asks)."""
        settings, checks = self.settings, self.checks
        return TimingJob(
            side="candidate",
            model=second,
            baseline=first,
            device=settings.device,
            model_seed=settings.model_seed,
            inputs_dir=str(self.inputs_dir),
            input_set=self.input_set,
            input_sets=checks.input_sets,
            expected=checks.expected,
            checks_file=CHECKS_FILE,
            min_rep_calls=settings.min_rep_calls,
            warmup_ms=settings.warmup_ms,
            rep_ms=settings.rep_ms,
            settle_wall_ms=settings.settle_step_wall_ms,
            graph_replay=self.graph_replay and graph_replay,
        )

    def turn_job(self, model: ModelSource, side: str, *, graph_replay: bool = True) -> TimingJob:
        """One child of a turn session: ``model`` alone, its calls recorded for the parent's
        check when it is the candidate's side (``gates.turns``)."""
        job = self.job(model, model, graph_replay=graph_replay)
        return job.model_copy(
            update={
                "side": side,
                "baseline": None,
                "turns": True,
                "checks_file": CHECKS_FILE if side == "candidate" else "",
            }
        )

    def turn_round(
        self, first: ModelSource, second: ModelSource, workdir: Path, *, graph_replay: bool = True
    ) -> TurnRound:
        """A turn session of ``first`` (the baseline child, trusted code only) and ``second``."""
        settings = self.settings
        return run_turn_round(
            self.turn_job(first, "baseline", graph_replay=graph_replay),
            self.turn_job(second, "candidate", graph_replay=graph_replay),
            workdir,
            pairs=settings.turn_pairs,
            timeout_s=settings.timing_timeout_s,
            device=settings.device,
            record_credit=settings.turn_record_credit,
        )


def prestart_round(
    baseline: ModelSource,
    candidate: ModelSource,
    setup: RoundSetup,
    *,
    workdir: Path,
    watched: list[Path],
) -> PrestartedRound:
    """``measure``'s first round, started now to build its baseline while gates 1-3 run;
    it waits at most as long as gates 1-3 may take (``gates.prestart``)."""
    settings = setup.settings
    return PrestartedRound(
        setup.job(baseline, candidate),
        workdir / "round0",
        timeout_s=settings.timing_timeout_s,
        wait_s=settings.static_timeout_s + 60.0,
        device=settings.device,
        watched=watched,
    )


EARLY_MARGIN = 2.0  # one round decides when its speedup is this far beyond the gamma band
# the decision's fields the agents' feedback quotes (PerfDecision); its reason is left out
_FEEDBACK_DECISION_KEYS = (
    "category",
    "speedup",
    "baseline_ms",
    "candidate_ms",
    "baseline_spread",
    "candidate_spread",
    "noise",
    "decisive",
    "speedup_low",
    "speedup_high",
)


def decided_by_one_round(baseline_ms: float, candidate_ms: float, gamma: float) -> bool:
    """True when a single round's speedup lies ``EARLY_MARGIN`` beyond the gamma band.

    A speedup at least twice past the band edge (>= 2 gamma, or <= 1 / (2
    gamma)) changes category only if the round misread the ratio by more than
    2x; the widest cross-process spread of one side seen on the H200 is 1.6x
    (a launch-bound transformer block's rounds at 0.25-0.40 ms,
    docs/TEAM_NOTES.md), and in a paired child both sides share the process's
    state.  So a second process could only cost time.
    """
    if baseline_ms <= 0 or candidate_ms <= 0:
        return False
    speedup = baseline_ms / candidate_ms
    return speedup >= gamma * EARLY_MARGIN or speedup <= 1.0 / (gamma * EARLY_MARGIN)


def host_decided_win(m: PerfMeasurement, gamma: float) -> bool:
    """A tentative win that rests on the host clock on either side (``primary``).

    The GPU's events time each slot of the paired child alike, but the host
    clock of a slot timed second in a process can read faster than the first
    for the same code (an identical candidate was once "1.3x faster" that way),
    so such a win is checked against ``order_control`` before it counts.
    """
    if not m.baseline or not m.candidate or m.candidate[0].event_ms is None:
        return False
    base = [m.primary(r) for r in m.baseline]
    cand = [m.primary(r) for r in m.candidate]
    if median(cand) <= 0:
        return False
    if m.turn_rounds:  # the pairs' ratios decide: a win by them is a win by the host clock
        if median([median(x) for x in m.pair_ratios() if x] or [0.0]) < gamma:
            return False
        return any(
            r.event_ms is not None and r.host_ms > r.event_ms for r in m.baseline + m.candidate
        )
    # either statistic the decision may use: the sides' medians or the rounds' own ratios
    ratios = paired_ratios(base, cand)
    if max(median(base) / median(cand), median(ratios) if ratios else 0.0) < gamma:
        return False
    return any(r.event_ms is not None and r.host_ms > r.event_ms for r in m.baseline + m.candidate)


def order_control(
    m: PerfMeasurement,
    baseline: ModelSource,
    setup: RoundSetup,
    *,
    rounds: int,
    workdir: Path,
) -> None:
    """A/A rounds: the baseline in the candidate's slot as well, in fresh paired children.

    Trusted code only, so nothing in them can be gamed; their ratio (first slot
    over second) is what the slot order alone does to the numbers.  A failed
    one is the baseline's failure, as in any round.  With turns, each is a turn
    session of the baseline against itself (the candidate's child running it).
    """
    for r in range(rounds):
        if setup.settings.turn_pairs > 0:
            session = setup.turn_round(
                baseline, baseline, workdir / f"control{r}", graph_replay=False
            )
            m.seconds += session.wall_s
            if session.failure is not None:
                m.failure = ("baseline", session.failure[1])
                return
            m.control_turns.append(session)
            continue
        outcome = run_job(
            setup.job(baseline, baseline, graph_replay=False),
            workdir / f"control{r}",
            timeout_s=setup.settings.timing_timeout_s,
            device=setup.settings.device,
        )
        m.seconds += outcome.wall_s
        if not outcome.ok or outcome.result is None:
            m.failure = ("baseline", outcome)
            return
        result = TimingResult.model_validate(outcome.result)
        if result.baseline is None:
            raise RuntimeError("a paired timing child returned no baseline timing")
        m.control.append(result)


def control_ratio(m: PerfMeasurement) -> float | None:
    """Median over the A/A rounds of first slot / second slot: above 1, the second slot (the
    candidate's) reads faster for the same code.  None without such rounds."""
    if m.control_turns:  # a session is the unit here too (``perfstats.turn_decision``)
        sessions = [median(t.ratios) for t in m.control_turns if t.ratios]
        return median(sessions) if sessions else None
    paired = [r for r in m.control if r.baseline is not None]
    ratios = paired_ratios([m.primary(r.baseline) for r in paired], [m.primary(r) for r in paired])
    return median(ratios) if ratios else None


def order_correction(m: PerfMeasurement) -> float:
    """What the order control takes off a win: its ratio when above 1, else 1 (it never
    adds to one)."""
    control = control_ratio(m)
    return control if control is not None and control > 1.0 else 1.0


def corrected_rounds(m: PerfMeasurement, correction: float) -> tuple[list[float], list[float]]:
    """Each side's round times, the candidate's scaled up by ``correction``."""
    return [m.primary(r) for r in m.baseline], [m.primary(r) * correction for r in m.candidate]


def corrected_ratios(m: PerfMeasurement, correction: float) -> list[list[float]]:
    """Each turn session's pair ratios divided by ``correction``."""
    return [[x / correction for x in session] for session in m.pair_ratios()]


def _order_controlled(
    m: PerfMeasurement, baseline: ModelSource, setup: RoundSetup, *, gamma: float, workdir: Path
) -> float:
    """The A/A rounds a host-decided win needs (``order_control``), and the correction
    they call for: above 1, the rounds that stopped on the uncorrected win may be too few."""
    settings = setup.settings
    if settings.order_control_rounds <= 0 or m.failure or not host_decided_win(m, gamma):
        return 1.0
    rounds = min(settings.order_control_rounds, len(m.candidate))
    order_control(m, baseline, setup, rounds=rounds, workdir=workdir)
    return 1.0 if m.failure else order_correction(m)


def _measuring(fn: Callable[..., PerfMeasurement]) -> Callable[..., PerfMeasurement]:
    """``measure`` with the GPU to itself (``gates.gpu_lease``), and the reference bundle's
    check (its keyword ``tampered_inputs``) run when a round is cut short
    (``gates.reference.checked_if_cut``)."""

    @wraps(fn)
    def run(
        baseline: ModelSource, candidate: ModelSource, setup: RoundSetup, **kwargs: Any
    ) -> PerfMeasurement:
        with checked_if_cut(kwargs.get("tampered_inputs")), timed_section(setup.settings.device):
            return fn(baseline, candidate, setup, **kwargs)

    return run


@_measuring
def measure(
    baseline: ModelSource,
    candidate: ModelSource,
    setup: RoundSetup,
    *,
    workdir: Path,
    tampered_inputs: Callable[[], list[str]] | None = None,
    before_candidate: Callable[[], None] | None = None,
    gamma: float | None = None,
    prestarted: PrestartedRound | None = None,
) -> PerfMeasurement:
    """Fresh-process rounds, each timing the baseline and then the candidate, until the
    spread is known (or ``max_rounds``, extended by ``noisy_rounds`` while undecided).

    One child per round times both sides through the same checked loop: the
    baseline first, before any candidate code exists in the process, then the
    candidate (``gates.jobs.timing.run``); rounds are independent processes,
    so cross-process noise shows as the spread of their medians.
    ``tampered_inputs`` (the reference bundle's check) runs after every child,
    ``before_candidate`` before it: a candidate that rewrote the shared input
    files or compiler caches is stopped there, before the next round's
    baseline loads what it left behind.  ``setup.checks`` makes every timed call a
    checked one: both sides rotate through the same input sets, and the
    candidate's recorded outputs are compared before its numbers count.
    ``gamma`` (default: the settings') lets the rounds stop as soon as their
    extremes agree on the category, and a first round far outside the gamma
    band (``decided_by_one_round``) ends the measurement; ``setup.graph_replay``
    also times each side's kernels alone (``dispatch_overhead``).  ``prestarted``: the
    first round's child, started during gates 1-3 with its baseline built
    (``gates.prestart``); it is released here, or discarded and replaced by a fresh one.
    """
    m = PerfMeasurement()
    settings = setup.settings
    gamma = settings.gamma if gamma is None else gamma
    if settings.turn_pairs > 0:
        if prestarted is not None:  # a paired child: turn sessions start children of their own
            prestarted.stop()
        kind: _RoundKind = _TurnRounds(baseline, candidate, setup)
    else:
        kind = _PairedRounds(baseline, candidate, setup, prestarted)
    rounds = partial(
        _measure_rounds,
        m,
        kind,
        setup,
        workdir=workdir,
        tampered_inputs=tampered_inputs,
        before_candidate=before_candidate,
        gamma=gamma,
    )
    next_round, stopped = rounds()
    if stopped:
        return m
    # the rounds may have stopped on a win the slot order made: if the corrected one
    # would not have stopped them, the rest of the rounds decide it
    correction = _order_controlled(m, baseline, setup, gamma=gamma, workdir=workdir)
    if correction > 1.0 and rounds(correction=correction, start=next_round)[1]:
        return m
    if _unstable(m, gamma, settings.noise_limit):
        m.other_work = other_work(settings.device)
    return m


@dataclass
class _PlayedRound:
    """One round's children, done: what ``_round_ends_measuring`` judges."""

    seconds: float
    phases: dict[str, float]
    failure: tuple[str, ChildOutcome] | None
    sides: Callable[[], tuple[TimingResult, TimingResult]]
    checks_path: Path
    counted: Callable[[], None] = lambda: None  # its numbers count


class _RoundKind(Protocol):
    """How ``measure``'s rounds are run and judged: a paired child each, or turn sessions."""

    def enough(self, m: PerfMeasurement, correction: float, gamma: float) -> bool:
        """The rounds so far, the candidate's scaled by ``correction``, settle the category."""

    def settled(self, m: PerfMeasurement, correction: float, gamma: float) -> bool:
        """Past ``max_rounds``: no noisy round more could flip the category."""

    def play(self, r: int, round_dir: Path, m: PerfMeasurement) -> _PlayedRound:
        """Round ``r``'s children, run to their end."""


class _PairedRounds:
    """One fresh child per round timing both sides; ``prestarted`` serves round 0 only."""

    def __init__(
        self,
        baseline: ModelSource,
        candidate: ModelSource,
        setup: RoundSetup,
        prestarted: PrestartedRound | None,
    ) -> None:
        self.settings = setup.settings
        self.job = setup.job(baseline, candidate)
        self.prestarted = prestarted

    def enough(self, m: PerfMeasurement, correction: float, gamma: float) -> bool:
        base, cand = corrected_rounds(m, correction)
        if len(cand) == 1 and decided_by_one_round(base[0], cand[0], gamma):
            return True
        return rounds_sufficient(
            base,
            cand,
            min_rounds=self.settings.min_rounds,
            spread_target=self.settings.spread_target,
            gamma=gamma,
        )

    def settled(self, m: PerfMeasurement, correction: float, gamma: float) -> bool:
        return not noisy_undecided(
            *corrected_rounds(m, correction), gamma=gamma, noise_limit=self.settings.noise_limit
        )

    def play(self, r: int, round_dir: Path, m: PerfMeasurement) -> _PlayedRound:
        outcome = self.prestarted.go() if self.prestarted is not None and r == 0 else None
        if outcome is not None and self.prestarted is not None:
            round_dir = self.prestarted.workdir
            m.prestarted = True
        else:
            outcome = run_job(
                self.job,
                round_dir,
                timeout_s=self.settings.timing_timeout_s,
                device=self.settings.device,
            )
        failure = None
        if not outcome.ok or outcome.result is None:
            # the candidate's part begins at its mark: before it, only trusted code ran
            failure = ("candidate" if "candidate" in outcome.phases else "baseline", outcome)
        return _PlayedRound(
            seconds=outcome.wall_s,
            phases=side_phases(outcome),
            failure=failure,
            sides=partial(_paired_sides, outcome),
            checks_path=round_dir / CHECKS_FILE,
        )


class _TurnRounds:
    """Turn sessions (``gates.turns``): the pairs' ratios decide (``turns_sufficient``)."""

    def __init__(self, baseline: ModelSource, candidate: ModelSource, setup: RoundSetup) -> None:
        self.baseline, self.candidate, self.setup = baseline, candidate, setup
        self.settings = setup.settings

    def enough(self, m: PerfMeasurement, correction: float, gamma: float) -> bool:
        found = corrected_ratios(m, correction)
        if len(found) == 1 and found[0] and decided_by_one_round(median(found[0]), 1.0, gamma):
            return True
        return turns_sufficient(
            found,
            min_rounds=self.settings.min_rounds,
            spread_target=self.settings.spread_target,
            gamma=gamma,
        )

    def settled(self, m: PerfMeasurement, correction: float, gamma: float) -> bool:
        found = corrected_ratios(m, correction)
        return (
            not any(found)
            or turn_decision(
                found, [1.0], [1.0], gamma=gamma, noise_limit=self.settings.noise_limit
            ).stable
        )

    def play(self, r: int, round_dir: Path, m: PerfMeasurement) -> _PlayedRound:
        session = self.setup.turn_round(self.baseline, self.candidate, round_dir)
        phases: dict[str, float] = {}
        for side, outcome in session.outcomes.items():
            for key, value in outcome.phase_seconds(side).items():
                phases[key] = phases.get(key, 0.0) + value
        return _PlayedRound(
            seconds=session.wall_s,
            phases=phases,
            failure=session.failure,
            sides=partial(_turn_sides, session),
            checks_path=round_dir / "candidate" / CHECKS_FILE,
            counted=partial(m.turn_rounds.append, session),
        )


def _measure_rounds(
    m: PerfMeasurement,
    kind: _RoundKind,
    setup: RoundSetup,
    *,
    workdir: Path,
    tampered_inputs: Callable[[], list[str]] | None,
    before_candidate: Callable[[], None] | None,
    gamma: float,
    correction: float = 1.0,
    start: int = 0,
) -> tuple[int, bool]:
    """``measure``'s rounds from round ``start``, of either kind, with the same checks after each.

    Rounds go on until ``kind.enough`` (the spread is known or the category decided),
    up to ``max_rounds``, and ``noisy_rounds`` more while the noise could still flip the
    category; the candidate's numbers are judged scaled by ``correction`` (the order
    control's).  Returns the next round's index and whether measuring must stop.
    """
    settings = setup.settings
    if start > 0 and kind.enough(m, correction, gamma):
        return start, False
    for r in range(start, settings.max_rounds + settings.noisy_rounds):
        if r >= settings.max_rounds and kind.settled(m, correction, gamma):
            return r, False
        round_dir = _round_start(m, settings, before_candidate, workdir / f"round{r}")
        played = kind.play(r, round_dir, m)
        kept = len(m.candidate)
        stop = _round_ends_measuring(
            m,
            setup,
            seconds=played.seconds,
            phases=played.phases,
            tampered_inputs=tampered_inputs,
            failure=played.failure,
            sides=played.sides,
            checks_path=played.checks_path,
        )
        if len(m.candidate) > kept:
            played.counted()
        if stop:
            return r + 1, True
        if kind.enough(m, correction, gamma):
            return r + 1, False
    return settings.max_rounds + settings.noisy_rounds, False


def _round_ends_measuring(
    m: PerfMeasurement,
    setup: RoundSetup,
    *,
    seconds: float,
    phases: dict[str, float],
    tampered_inputs: Callable[[], list[str]] | None,
    failure: tuple[str, ChildOutcome] | None,
    sides: Callable[[], tuple[TimingResult, TimingResult]],
    checks_path: Path,
) -> bool:
    """What every round does once its children are done, paired or turns; True: stop.

    Its time is charged, the shared files checked, a failure recorded; then the
    candidate's recorded calls are compared before its numbers count, and a side
    that saw its process tampered with ends the measurement whatever it reads.
    """
    m.seconds += seconds
    for key, value in phases.items():
        m.phase_seconds[key] = round(m.phase_seconds.get(key, 0.0) + value, 3)
    if tampered_inputs is not None:
        m.inputs_tampered = tampered_inputs()
        if m.inputs_tampered:
            return True
    if failure is not None:
        m.failure = failure
        return True
    base, cand = sides()
    m.order += ["baseline", "candidate"]
    m.baseline.append(base)
    checked = setup.checks.check(checks_path)
    m.checks.append(checked)
    if not checked.ok:
        m.wrong_output = checked
        return True  # its numbers do not count: it did not compute the answer
    m.candidate.append(cand)
    return bool(cand.tampered_before or cand.tampered_after)  # stop spending GPU time


def _paired_sides(outcome: ChildOutcome) -> tuple[TimingResult, TimingResult]:
    result = TimingResult.model_validate(outcome.result)
    if result.baseline is None:
        raise RuntimeError("a paired timing child returned no baseline timing")
    return result.baseline, result.model_copy(update={"baseline": None})


def _turn_sides(session: TurnRound) -> tuple[TimingResult, TimingResult]:
    if session.baseline is None or session.candidate is None:
        raise RuntimeError("a turn session returned no timing for a side")
    return session.baseline, session.candidate


def _round_start(
    m: PerfMeasurement,
    settings: GateSettings,
    before_candidate: Callable[[], None] | None,
    round_dir: Path,
) -> Path:
    """What every round does before its children start: the candidate's cache-guard window
    (``before_candidate``) and, when asked, a wait for other work on the GPU to pause."""
    if before_candidate is not None:
        before_candidate()
    waited = wait_for_quiet(settings.device, settings.quiet_gpu_wait_s)
    if waited is not None:
        m.quiet_waits.append(waited)
    return round_dir


def _unstable(m: PerfMeasurement, gamma: float, noise_limit: float) -> bool:
    """Rounds that will quarantine: the only measurement worth asking NVML about."""
    correction = order_correction(m)  # as ``perf_verdict`` judges them
    if m.turn_rounds:
        ratios = corrected_ratios(m, correction)
        return not turn_decision(ratios, [1.0], [1.0], gamma=gamma, noise_limit=noise_limit).stable
    if len(m.candidate) < 2 or len(m.baseline) != len(m.candidate):
        return False
    base, cand = corrected_rounds(m, correction)
    return not decide_category(base, cand, gamma=gamma, noise_limit=noise_limit).stable


def _side_metrics(results: list[TimingResult]) -> dict[str, Any]:
    return {
        "rounds": [
            {
                "event_ms": r.event_ms,
                "primary_ms": PerfMeasurement.primary(r),
                "samples": len(r.event_samples),
                "iqr_rel": round(iqr_rel(r.event_samples), 5),
                "host_ms": r.host_ms,
                "host_samples": r.host_samples,
                "host_calls_per_batch": r.host_calls_per_batch,
                "host_copies_ms": r.host_copies_ms,
                "host_raw_ms": r.host_raw_ms,
                "warm_seconds": round(r.warm_seconds, 3),
                "settle_ms": [round(x, 5) for x in r.settle_ms],
                "cpus": r.cpus,
                "cpu_nodes": r.cpu_nodes,
                "gpu_node": r.gpu_node,
                "tampered_before": r.tampered_before,
                "tampered_after": r.tampered_after,
                "event_samples": [round(x, 6) for x in r.event_samples[:100]],
            }
            for r in results
        ],
        "median_ms": median([PerfMeasurement.primary(r) for r in results]),
        "host_median_ms": median([r.host_ms for r in results]),
    }


def _turn_metrics(m: PerfMeasurement) -> dict[str, Any]:
    """How the turn sessions ran: pairs, calls per turn, the CPU, every turn and probe wait."""
    return {
        "pairs": sum(len(x) for x in m.pair_ratios()),
        "sessions": len(m.turn_rounds),
        "pair_ratios": [[round(x, 5) for x in session] for session in m.pair_ratios()],
        "spread": (
            "from six sessions on, the 95% interval of the session medians' median; below, "
            "the larger of the pairs' interquartile range within a session and the spread "
            "of the session medians"
        ),
        "rounds": [
            {
                "calls_per_turn": t.calls,
                "calls_from_estimate": t.calls_raw,
                "calibration_ms": [round(x, 6) for x in t.calibration_ms],
                "cpu": t.cpu,
                "turns_ms": [[side, round(ms, 6)] for side, ms in t.turns],
                "windows_ms": [[side, round(ms, 4)] for side, ms in t.windows_ms],
                "records_ms": [round(x, 4) for x in t.records_ms],
                "taken_off_ms": [round(x, 4) for x in t.taken_off_ms],
                "probe_waits_ms": [round(x, 4) for x in t.probe_waits_ms],
            }
            for t in m.turn_rounds
        ],
    }


def _side_timers(rounds: list[TimingResult], settings: GateSettings) -> TimerAgreement:
    """One side's median GPU-event time (None when no round had events) against its median
    host time: whether its two clocks agree."""
    events = [r.event_ms for r in rounds if r.event_ms is not None]
    return timers_agree(
        median(events) if events else None,
        median([r.host_ms for r in rounds]),
        rel=settings.timer_disagree_rel,
        abs_ms=settings.timer_disagree_abs_ms,
    )


def _gpu_work(base_event: float | None, cand_event: float | None) -> dict[str, float]:
    """Each side's GPU work alone (its events), beside the gate's wall-time number.

    Where a side is dispatch-bound the verdict's speedup is mostly host time; the
    report states the GPU-only ratio next to it so a user sees where the win comes from.
    """
    if base_event is None or cand_event is None or cand_event <= 0:
        return {}
    return {
        "baseline_ms": base_event,
        "candidate_ms": cand_event,
        "speedup": base_event / cand_event,
    }


def _graph_metrics(m: PerfMeasurement) -> dict[str, Any]:
    """Each side's CUDA-graph replay time (its kernels alone), when both were captured."""
    base = [r.graph_ms for r in m.baseline if r.graph_ms is not None]
    cand = [r.graph_ms for r in m.candidate if r.graph_ms is not None]
    notes = sorted({r.graph_note for r in m.baseline + m.candidate if r.graph_note})
    if not base or not cand:
        return {"notes": notes} if notes else {}
    b, c = median(base), median(cand)
    return {"baseline_ms": b, "candidate_ms": c, "speedup": b / c if c > 0 else None}


def timing_summary(metrics: dict[str, Any]) -> dict[str, Any]:
    """The part of a gate-4 verdict's metrics the agents' feedback quotes: small enough to
    carry in every decision (the rounds' raw samples stay in the verdict's log)."""
    out: dict[str, Any] = {}
    decision = metrics.get("decision")
    if isinstance(decision, dict):
        out["decision"] = {k: decision[k] for k in _FEEDBACK_DECISION_KEYS if k in decision}
    for key in ("graph_replay", "gpu_work"):
        value = metrics.get(key)
        if isinstance(value, dict) and value.get("baseline_ms") and value.get("candidate_ms"):
            out[key] = {
                k: value[k] for k in ("baseline_ms", "candidate_ms", "speedup") if k in value
            }
    if metrics.get("one_round"):
        out["one_round"] = True
    return out


def dispatch_overhead(v4: GateVerdict, gamma: float) -> GateVerdict | None:
    """FAIL a candidate whose kernels beat the baseline's but whose forward is slower.

    SPEC.md section 5: every gate-4 rejection in the paper was a kernel really
    faster per kernel (by ncu) that made the model slower -- a standalone
    kernel's launch and Python dispatch cost more than it saved.  Such a
    candidate is not a step toward a faster model however good its kernel is,
    and the writer needs to hear why; a candidate slower in both is left to
    the search as ranking data.
    """
    graphs = v4.metrics.get("graph_replay") or {}
    decision = v4.metrics.get("decision") or {}
    kernel_speedup = graphs.get("speedup")
    if v4.status != GateStatus.FAIL or decision.get("category") != PerfCategory.SLOWER.value:
        return None
    if kernel_speedup is None or kernel_speedup < gamma:
        return None
    forward = decision["speedup"]
    reason = (
        f"faster per kernel, slower in the model: its kernels replay {kernel_speedup:.3g}x "
        f"faster from a CUDA graph ({graphs['candidate_ms']:.4g} vs {graphs['baseline_ms']:.4g} "
        f"ms) but the dispatched forward is {forward:.3g}x ({decision['candidate_ms']:.4g} vs "
        f"{decision['baseline_ms']:.4g} ms): launch and Python overhead eat the win"
    )
    return GateVerdict(
        gate=GateName.PERFORMANCE,
        status=GateStatus.FAIL,
        reason=reason,
        metrics=v4.metrics,
        thresholds=v4.thresholds,
        feedback=(
            f"Your kernels are {kernel_speedup:.3g}x faster than the compiled baseline's, but the "
            f"whole forward is {forward:.3g}x as fast: the work around the launch (Python in "
            "forward(), extra launches, host-side loops, allocations or copies per call) costs "
            "more than the kernels save. Keep the kernel; make forward() a single launch with "
            "its grid and arguments computed cheaply."
        ),
        gpu_seconds=v4.gpu_seconds,
    )


def perf_verdict(
    m: PerfMeasurement,
    *,
    settings: GateSettings,
    gamma: float,
    roofline: RooflineInputs | None,
) -> tuple[GateVerdict, PerfCategory | None, float | None]:
    """Gate 4 verdict, its category and speedup (see module docstring for the order)."""
    thresholds: dict[str, Any] = {
        "gamma": gamma,
        "warmup_ms": settings.warmup_ms,
        "rep_ms": settings.rep_ms,
        "min_rounds": settings.min_rounds,
        "max_rounds": settings.max_rounds,
        "spread_target": settings.spread_target,
        "noise_limit": settings.noise_limit,
        "timer_disagree_rel": settings.timer_disagree_rel,
        "timer_disagree_abs_ms": settings.timer_disagree_abs_ms,
        "roofline_slack": settings.roofline_slack,
    }
    metrics: dict[str, Any] = {
        "order": m.order,
        "baseline": _side_metrics(m.baseline),
        "candidate": _side_metrics(m.candidate),
    }
    graphs = _graph_metrics(m)
    if graphs:
        metrics["graph_replay"] = graphs
    if m.quiet_waits:
        metrics["quiet_gpu_waits_s"] = m.quiet_waits
    if m.prestarted:  # round 0's baseline was built beside gates 1-3 (``gates.prestart``)
        metrics["prestarted"] = True
    turns_note = ""
    if m.turn_rounds:
        metrics["turns"] = _turn_metrics(m)
        pairs = sum(len(x) for x in m.pair_ratios())
        turns_note = f"; turns: {pairs} pairs in {len(m.turn_rounds)} sessions"

    def verdict(status: GateStatus, reason: str, feedback: str = "") -> GateVerdict:
        return GateVerdict(
            gate=GateName.PERFORMANCE,
            status=status,
            reason=reason,
            metrics=metrics,
            thresholds=thresholds,
            feedback=feedback,
            gpu_seconds=m.seconds if settings.device.startswith("cuda") else 0.0,
        )

    if m.inputs_tampered:
        metrics["inputs_tampered"] = m.inputs_tampered
        return (
            verdict(
                GateStatus.FAIL,
                f"candidate rewrote shared files {m.inputs_tampered} while being timed "
                "(restored before anything else ran)",
                TAMPERED_INPUTS_FEEDBACK,
            ),
            None,
            None,
        )
    if m.checks:
        metrics["checked_calls"] = [c.as_dict() for c in m.checks]
    if m.wrong_output is not None:
        return (
            verdict(
                GateStatus.FAIL,
                f"a timed call was wrong: {m.wrong_output.reason}",
                "Your kernel returned a wrong result while it was being timed "
                f"({m.wrong_output.reason}). Every timed call is checked, at positions and "
                "calls chosen after the fact, on inputs that change between calls: the output "
                "must be a plain torch.Tensor computed from the current inputs on every call, "
                "with no caching across calls and no shortcut after the first calls.",
            ),
            None,
            None,
        )
    if m.failure is not None:
        side, outcome = m.failure
        metrics["failed_side"] = side
        metrics["child"] = outcome.summary()
        metrics["traceback"] = outcome.error_text()
        if side == "baseline":
            metrics["infrastructure"] = True
            return (
                verdict(GateStatus.ERROR, f"baseline could not be timed: {outcome.describe()}"),
                None,
                None,
            )
        return (
            verdict(
                GateStatus.ERROR,
                f"candidate failed while being timed: {outcome.describe()}",
                crash_feedback(outcome),
            ),
            None,
            None,
        )
    # a change the baseline's processes show too is the harness's (torch, Inductor), not
    # the candidate's: the baseline never imports candidate code
    harness = {t for r in m.baseline for t in r.tampered_before + r.tampered_after}
    if harness:
        metrics["changed_by_baseline"] = sorted(harness)
    tampered = sorted(
        {t for r in m.candidate for t in r.tampered_before + r.tampered_after} - harness
    )
    if tampered:
        host = median([r.host_ms for r in m.candidate])
        metrics["tampered"] = tampered
        return (
            verdict(
                GateStatus.FAIL,
                "candidate replaced timing functions or changed global backend settings: "
                f"{', '.join(tampered)} (restored; honest host time {host:.4g} ms)",
                "Your module replaced timing or synchronisation functions, or changed "
                f"global torch backend settings ({', '.join(tampered)}). Kernels must not "
                "touch timers, events, synchronisation or switches such as TF32 and "
                "cudnn.benchmark, which change the library calls around your kernel; the "
                "measurement is done with the originals regardless.",
            ),
            None,
            None,
        )
    if not settings.device.startswith("cuda"):
        # the CPU (Triton interpreter) exercises the checked loop, never a speed claim
        calls = sum(c.calls for c in m.checks)
        return (
            verdict(
                GateStatus.PASS,
                f"all {calls} timed calls checked (inputs rotated, outputs compared); "
                f"no speed verdict on the CPU{turns_note}",
            ),
            None,
            None,
        )
    correction = order_correction(m)  # never the other way: it only ever takes a win away
    base_rounds, cand_rounds = corrected_rounds(m, correction)
    ratios = corrected_ratios(m, correction)
    order_note = ""
    control = control_ratio(m)
    if control is not None:
        metrics["order_control"] = {
            "ratio": control,
            "first_ms": [m.primary(r.baseline) for r in m.control if r.baseline is not None],
            "second_ms": [m.primary(r) for r in m.control],
        }
        if m.control_turns:
            metrics["order_control"]["pair_ratios"] = [
                round(x, 5) for t in m.control_turns for x in t.ratios
            ]
        if correction > 1.0:
            order_note = (
                f"; the baseline timed in the candidate's slot read {control:.3g}x faster "
                "(order control), taken off the speedup"
            )
    if m.turn_rounds:  # the pairs decide: adjacent turns share the host clock's regime
        decision = turn_decision(
            ratios,
            [x for r in m.baseline for x in r.host_samples],
            [x for r in m.candidate for x in r.host_samples],
            gamma=gamma,
            noise_limit=settings.noise_limit,
        )
    else:
        decision = decide_category(
            base_rounds, cand_rounds, gamma=gamma, noise_limit=settings.noise_limit
        )
    metrics["decision"] = decision.as_dict()
    agreement = _side_timers(m.candidate, settings)
    base_agreement = _side_timers(m.baseline, settings)
    cand_event, base_event = agreement.event_ms, base_agreement.event_ms
    metrics["timers"] = {
        "candidate": {"agree": agreement.agree, "reason": agreement.reason},
        "baseline": {"agree": base_agreement.agree, "reason": base_agreement.reason},
    }
    host_note = "" if agreement.agree else f"; timed by the host clock ({agreement.reason})"
    gpu_work = _gpu_work(base_event, cand_event)
    if gpu_work:
        metrics["gpu_work"] = gpu_work
        host_bound = (
            agreement.host_ms > DISPATCH_BOUND * cand_event
            or base_agreement.host_ms > DISPATCH_BOUND * base_event
        )
        if host_bound:
            host_note += (
                f"; GPU work alone {gpu_work['baseline_ms']:.4g} -> "
                f"{gpu_work['candidate_ms']:.4g} ms ({gpu_work['speedup']:.3g}x)"
            )
    if roofline is not None:
        ceilings = ceilings_for(roofline.device_name, settings.copy_bandwidth_gbs)
        if ceilings is not None:
            check = roofline_check(
                ceilings=ceilings,
                bytes_in=roofline.bytes_in,
                bytes_out=roofline.bytes_out,
                candidate_ms=decision.candidate_ms,
                baseline_ms=decision.baseline_ms,
                flops=roofline.flops,
                slack=settings.roofline_slack,
            )
            metrics["roofline"] = check.as_dict()
            if check.below_floor:
                return (
                    verdict(GateStatus.QUARANTINE, check.reason),
                    decision.category,
                    decision.speedup,
                )
        else:
            metrics["roofline"] = {"skipped": f"no ceilings known for {roofline.device_name}"}
    if not decision.stable:
        contention = ""
        if m.other_work is not None:
            metrics["other_work"] = m.other_work.as_dict()
            contention = f"; {m.other_work.describe()}" if m.other_work.seen else ""
        return (
            verdict(
                GateStatus.QUARANTINE,
                f"timing not stable: spread {decision.noise:.1%} after {len(cand_rounds)} rounds "
                f"(limit {settings.noise_limit:.0%}); {decision.reason}{order_note}{contention}",
            ),
            decision.category,
            decision.speedup,
        )
    summary = (
        f"{decision.category.value}: {decision.baseline_ms:.4g} ms -> {decision.candidate_ms:.4g} ms, "
        f"{decision.reason}{host_note}{order_note}"
    )
    if len(cand_rounds) == 1:
        # one round's spread is no noise estimate, whether the settings asked for one round
        # or decided_by_one_round ended the measurement; the feedback says it is unknown
        metrics["one_round"] = True
        if settings.min_rounds > 1:
            summary += f"; one round decided it ({EARLY_MARGIN:g}x beyond the gamma band)"
    if decision.category == PerfCategory.SLOWER:
        return (
            verdict(
                GateStatus.FAIL,
                summary,
                f"Your candidate is correct but slower end to end: {decision.candidate_ms:.4g} ms "
                f"against the compiled baseline's {decision.baseline_ms:.4g} ms "
                f"({decision.speedup:.3g}x). Replacing fused compiler output with separate "
                "kernels adds launches and memory traffic; fuse more, or leave this part alone.",
            ),
            decision.category,
            decision.speedup,
        )
    return verdict(GateStatus.PASS, summary), decision.category, decision.speedup
