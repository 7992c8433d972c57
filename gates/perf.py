"""Gate 4 -- V_perf: baseline and candidate timed the same way, in fresh processes.

Each round is one fresh child that times the baseline and then the
candidate through the same checked loop; the baseline is timed before the
candidate is imported (it cannot reach the baseline's numbers while they
are made), and the baseline's objects and memory are gone when it is
(``gates.jobs.timing``).  Rounds repeat until each side's per-round medians
agree within ``spread_target`` (the spread is then known) or ``max_rounds``
is reached, and up to ``noisy_rounds`` more while the noise could still flip
the category (``noisy_undecided``); a first round far outside the gamma band decides alone
(``decided_by_one_round``) when its GPU events, not the host clock, decide it.  With ``GateSettings.turn_pairs`` each round is a turn
session instead (``gates.turns``: a baseline child and a candidate child take
alternating turns timed by this process) and the pairs' ratios decide
(``perfstats.turn_decision``).  Every timed call is checked (gates/checked_calls.py):
a wrong output in any of them ends the measurement.  ``gates.perf_verdict`` turns
the measurement into the verdict.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import partial, wraps
from pathlib import Path
from typing import Any, Protocol

from gates.control_pool import POOL as CONTROL_POOL
from gates.control_pool import PooledRound, control_key
from gates.first_sight import FIRST_SIGHT_CALLS
from gates.gpu_contention import OtherWork, other_work, wait_for_quiet
from gates.gpu_lease import timed_section
from gates.perfstats import (
    PerfDecision,
    decide_category,
    median,
    noisy_undecided,
    paired_ratios,
    rounds_sufficient,
    turn_decision,
    turns_sufficient,
)
from gates.prestart import PrestartedRound
from gates.protocol import ModelSource, OutputLeaf, SideEffects, TimingJob, TimingResult
from gates.reference import checked_if_cut
from gates.runner import ChildOutcome, run_job
from gates.timed_checks import TimedCheck
from gates.turns import TurnRound, run_turn_round
from kernelopt.contracts.verdicts import (
    GateSettings,
    PerfCategory,
)


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
    # the pool's entries for this verdict's A/A rounds, its own and those lent by earlier
    # verdicts of the same job (gates/control_pool.py), and how old the lent ones were
    control_pooled: list[PooledRound] = field(default_factory=list)
    control_lent_ages_s: list[float] = field(default_factory=list)
    # (baseline, candidate) of the paired round set aside for turns (host_clock_turns)
    host_probe: tuple[TimingResult, TimingResult] | None = None
    # its child's seconds and phases (what routing a verdict to turns costs)
    host_probe_seconds: float = 0.0
    host_probe_phases: dict[str, float] = field(default_factory=dict)
    # what the first paired round's baseline side showed (None: no such round), read before
    # the candidate was loaded: kept by the reference for later verdicts (reuse_host_probe)
    baseline_dispatch_bound: bool | None = None
    host_probe_reused: bool = False  # an earlier verdict's finding sent this one to turns
    # ... whose first session read a ratio too far for turns: paired rounds decided instead
    turns_set_aside: TurnRound | None = None
    # the A/A rounds ran for a host-decided "slower" (``slot_credit_from``), not for a win:
    # the speedup they found, which a credit may lift to at most 1.0
    credit_from: float | None = None

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


CHECKS_FILE = "checks.pt"  # what a timing child recorded of its calls, in its workdir


@dataclass(frozen=True)
class TimingChecks:
    """How the timing children check every call: the sets, the structure, the comparison
    (``check(path, first_sight)``: a candidate side's recorded calls, with the first-sight
    sets it was given), and each round's first-sight sets (``gates.first_sight``)."""

    input_sets: list[str]
    expected: list[OutputLeaf]  # a call's outputs, then its side effects' values
    check: Callable[[Path, list[str]], TimedCheck]
    effects: SideEffects = field(default_factory=SideEffects)
    baseline_first_sight: list[str] = field(default_factory=list)  # the same every round
    sealed: list[str] = field(default_factory=list)  # the candidate's: a few per round
    sealed_dir: str = ""

    def first_sight(self, round_index: int | None) -> tuple[list[str], list[str]]:
        """(baseline's, candidate's) first-sight sets in round ``round_index``: none in an
        A/A round (None) or once the sealed sets are used up, for either side."""
        if round_index is None or not self.baseline_first_sight:
            return [], []
        start = FIRST_SIGHT_CALLS * round_index
        candidate = self.sealed[start : start + FIRST_SIGHT_CALLS]
        return (list(self.baseline_first_sight), candidate) if candidate else ([], [])


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
    # an earlier verdict on this reference found the baseline dispatch-bound: with
    # ``reuse_host_probe`` the rounds are turn sessions from the first (no probe round)
    baseline_dispatch_bound: bool = False

    def job(
        self,
        first: ModelSource,
        second: ModelSource,
        *,
        graph_replay: bool = True,
        round_index: int | None = None,
    ) -> TimingJob:
        """One round's paired job: ``first`` timed first, then ``second``, every call checked
        (``graph_replay=False`` leaves out the CUDA-graph time even where the setup asks);
        round ``round_index``'s first-sight sets (none without one: an A/A round)."""
        settings, checks = self.settings, self.checks
        base_once, once = checks.first_sight(round_index)
        return TimingJob(
            side="candidate",
            model=second,
            baseline=first,
            device=settings.device,
            model_seed=settings.model_seed,
            inputs_dir=str(self.inputs_dir),
            input_set=self.input_set,
            input_sets=checks.input_sets,
            first_sight_sets=once,
            baseline_first_sight_sets=base_once,
            sealed_dir=checks.sealed_dir,
            expected=checks.expected,
            effects=checks.effects,
            checks_file=CHECKS_FILE,
            min_rep_calls=settings.min_rep_calls,
            warmup_ms=settings.warmup_ms,
            rep_ms=settings.rep_ms,
            settle_wall_ms=settings.settle_step_wall_ms,
            graph_replay=self.graph_replay and graph_replay,
        )

    def turn_job(
        self,
        model: ModelSource,
        side: str,
        *,
        graph_replay: bool = True,
        round_index: int | None = None,
    ) -> TimingJob:
        """One child of a turn session: ``model`` alone, its calls recorded for the parent's
        check when it is the candidate's side (``gates.turns``)."""
        job = self.job(model, model, graph_replay=graph_replay, round_index=round_index)
        return job.model_copy(
            update={
                "side": side,
                "baseline": None,
                "first_sight_sets": (
                    job.first_sight_sets if side == "candidate" else job.baseline_first_sight_sets
                ),
                "baseline_first_sight_sets": [],
                "turns": True,
                "checks_file": CHECKS_FILE if side == "candidate" else "",
                "turn_prep_calls": self.settings.turn_prep_calls,
            }
        )

    def turn_round(
        self,
        first: ModelSource,
        second: ModelSource,
        workdir: Path,
        *,
        graph_replay: bool = True,
        round_index: int | None = None,
    ) -> TurnRound:
        """A turn session of ``first`` (the baseline child, trusted code only) and ``second``."""
        settings = self.settings
        return run_turn_round(
            self.turn_job(first, "baseline", graph_replay=graph_replay, round_index=round_index),
            self.turn_job(second, "candidate", graph_replay=graph_replay, round_index=round_index),
            workdir,
            pairs=settings.turn_pairs,
            timeout_s=settings.timing_timeout_s,
            device=settings.device,
            record_credit=settings.turn_record_credit,
            probe_child=settings.turn_probe_child,
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
        setup.job(baseline, candidate, round_index=0),
        workdir / "round0",
        timeout_s=settings.timing_timeout_s,
        wait_s=settings.static_timeout_s + 60.0,
        device=settings.device,
        watched=watched,
    )


EARLY_MARGIN = 2.0  # one round decides when its speedup is this far beyond the gamma band
DISPATCH_BOUND = 1.2  # host time beyond this many times the GPU work: dispatch-bound
# a reused finding's first turn session read beyond this either way goes back to paired
# rounds: a turn's harness work pulls ratios towards 1 (a 70x win read 10.9x on the H200),
# so the truth may lie past the 4x (host_clock_turns_max_ratio) where paired rounds decide
REUSED_TURNS_FAR = 2.0
# a host-decided "slower" from here up to the gamma band gets A/A rounds, whose slot
# effect is credited (never past a match); no slot effect measured comes near 10%
SLOT_CREDIT_FLOOR = 0.9


def decided_by_one_round(baseline_ms: float, candidate_ms: float, gamma: float) -> bool:
    """True when a single round's speedup lies ``EARLY_MARGIN`` beyond the gamma band.

    A speedup at least twice past the band edge (>= 2 gamma, or <= 1 / (2
    gamma)) changes category only if the round misread the ratio by more than
    2x; the widest cross-process spread of one side seen on the H200 is 1.6x
    (a launch-bound transformer block's rounds at 0.25-0.40 ms,
    docs/TEAM_NOTES.md), and in a paired child both sides share the process's
    state.  So a second process could only cost time -- for the events: a round
    the host clock decides always gets one (``_PairedRounds.enough``).
    """
    if baseline_ms <= 0 or candidate_ms <= 0:
        return False
    speedup = baseline_ms / candidate_ms
    return speedup >= gamma * EARLY_MARGIN or speedup <= 1.0 / (gamma * EARLY_MARGIN)


def rests_on_host_clock(m: PerfMeasurement) -> bool:
    """Some round's number on either side is its host time, not its GPU events (``primary``):
    a dispatch-bound forward, timed by a clock whose speed moves between regimes."""
    return any(r.event_ms is not None and r.host_ms > r.event_ms for r in m.baseline + m.candidate)


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
        return rests_on_host_clock(m)
    # either statistic the decision may use: the sides' medians or the rounds' own ratios
    ratios = paired_ratios(base, cand)
    if max(median(base) / median(cand), median(ratios) if ratios else 0.0) < gamma:
        return False
    return rests_on_host_clock(m)


def order_control(
    m: PerfMeasurement,
    baseline: ModelSource,
    setup: RoundSetup,
    *,
    rounds: int,
    workdir: Path,
    first: int = 0,
) -> None:
    """A/A rounds: the baseline in the candidate's slot as well, in fresh paired children.

    Trusted code only, so nothing in them can be gamed; their ratio (first slot
    over second) is what the slot order alone does to the numbers, so each is the
    rounds' own job (the first slot's CUDA-graph replay included: in a round it runs
    between the slots, on the host and the GPU the second slot is timed on).  A failed
    one is the baseline's failure, as in any round.  With turns, each is a turn
    session of the baseline against itself (the candidate's child running it).
    """
    for r in range(first, first + rounds):
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
            setup.job(baseline, baseline),
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
    """What the order control does to the candidate's speedup (divided by it): for a win,
    its ratio when above 1, else 1 (it never adds to a win); for a host-decided "slower"
    (``m.credit_from``), its ratio when below 1, but never so far that a credit makes a
    win: the corrected speedup stays at most 1.0."""
    control = control_ratio(m)
    if control is None:
        return 1.0
    if m.credit_from is not None:
        return min(1.0, max(control, m.credit_from))
    return max(control, 1.0)


def slot_credit_from(m: PerfMeasurement, gamma: float, noise_limit: float) -> float | None:
    """The speedup of a "slower" the host clock decides, within ``SLOT_CREDIT_FLOOR`` of the
    baseline (else None): the candidate's slot alone may have made it (identical code has
    read slower than the gamma band in turns: docs/TEAM_NOTES.md, thirty-fifth session), so
    A/A rounds measure that slot before the candidate is failed."""
    if not m.baseline or not m.candidate or m.candidate[0].event_ms is None:
        return None
    decision = _judged(m, 1.0, gamma=gamma, noise_limit=noise_limit)
    if decision.category != PerfCategory.SLOWER or decision.speedup < SLOT_CREDIT_FLOOR:
        return None
    return decision.speedup if rests_on_host_clock(m) else None


def corrected_rounds(m: PerfMeasurement, correction: float) -> tuple[list[float], list[float]]:
    """Each side's round times, the candidate's scaled up by ``correction``."""
    return [m.primary(r) for r in m.baseline], [m.primary(r) * correction for r in m.candidate]


def corrected_ratios(m: PerfMeasurement, correction: float) -> list[list[float]]:
    """Each turn session's pair ratios divided by ``correction``."""
    return [[x / correction for x in session] for session in m.pair_ratios()]


def _order_controlled(
    m: PerfMeasurement, baseline: ModelSource, setup: RoundSetup, *, gamma: float, workdir: Path
) -> float:
    """The A/A rounds a host-decided win, or a host-decided "slower" near the band, needs
    (``order_control``), and the correction they call for: away from 1, the rounds that
    stopped on the uncorrected numbers may be too few."""
    settings = setup.settings
    if settings.order_control_rounds <= 0 or m.failure:
        return 1.0
    rounds = min(settings.order_control_rounds, len(m.candidate))
    key = control_key(setup.job(baseline, baseline).model_dump_json(), settings.model_dump_json())
    m.credit_from = slot_credit_from(m, gamma, settings.noise_limit)
    if m.credit_from is not None:
        _pooled_control(m, baseline, setup, rounds=rounds, workdir=workdir, key=key)
        return 1.0 if m.failure else order_correction(m)
    if not host_decided_win(m, gamma):
        return 1.0
    _pooled_control(m, baseline, setup, rounds=rounds, workdir=workdir, key=key)
    # A few A/A rounds can all land in a rare regime of the host clock (the first slot
    # slow) that most paired rounds missed; a correction that would turn the win into
    # "slower" is measured again over as many rounds as the candidate had.
    more = len(m.candidate) - _controls(m)
    if not m.failure and more > 0 and _correction_makes_slower(m, gamma, settings.noise_limit):
        _pooled_control(m, baseline, setup, rounds=more, workdir=workdir, key=key)
    return 1.0 if m.failure else order_correction(m)


def _pooled_control(
    m: PerfMeasurement,
    baseline: ModelSource,
    setup: RoundSetup,
    *,
    rounds: int,
    workdir: Path,
    key: str,
) -> None:
    """``rounds`` A/A rounds: at least one run now, the rest lent by the process's pool
    (``gates.control_pool``) when it has young ones of the same job; those run now join it."""
    pool = CONTROL_POOL if setup.settings.control_pool else None
    lent = pool.lend(key, rounds - 1, m.control_pooled) if pool is not None else []
    turns = setup.settings.turn_pairs > 0
    first = _controls(m)
    order_control(m, baseline, setup, rounds=rounds - len(lent), workdir=workdir, first=first)
    if m.failure:
        return
    fresh = m.control_turns[first:] if turns else m.control[first:]
    if pool is not None:
        m.control_pooled += pool.add(key, list(fresh)) + lent
    for r in lent:
        (m.control_turns if turns else m.control).append(r.result)
    m.control_lent_ages_s += [round(time.monotonic() - r.ended, 1) for r in lent]


def _controls(m: PerfMeasurement) -> int:
    """How many A/A rounds (or A/A turn sessions) ran."""
    return len(m.control_turns) if m.control_turns else len(m.control)


def _correction_makes_slower(m: PerfMeasurement, gamma: float, noise_limit: float) -> bool:
    """The order control's correction, not the rounds, would call the candidate slower."""
    judged = partial(_judged, m, gamma=gamma, noise_limit=noise_limit)
    corrected_slower = judged(order_correction(m)).category == PerfCategory.SLOWER
    return corrected_slower and judged(1.0).category != PerfCategory.SLOWER


def _judged(
    m: PerfMeasurement, correction: float, *, gamma: float, noise_limit: float
) -> PerfDecision:
    """The rounds so far judged as ``perf_verdict`` judges them, the candidate's scaled by
    ``correction`` (turn sessions without their turns' host samples)."""
    if m.turn_rounds:
        ratios = corrected_ratios(m, correction)
        return turn_decision(ratios, [1.0], [1.0], gamma=gamma, noise_limit=noise_limit)
    return decide_category(*corrected_rounds(m, correction), gamma=gamma, noise_limit=noise_limit)


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
    switching = _switches_to_turns(settings)
    if switching and settings.reuse_host_probe and setup.baseline_dispatch_bound:
        setup = _with_turns(setup, settings.host_clock_turns)
        settings, switching, m.host_probe_reused = setup.settings, False, True
    if settings.turn_pairs > 0:
        if prestarted is not None:  # a paired child: turn sessions start children of their own
            prestarted.stop()
        kind: _RoundKind = _TurnRounds(baseline, candidate, setup)
    else:
        kind = _PairedRounds(baseline, candidate, setup, prestarted)
    rounds = partial(
        _measure_rounds,
        m,
        kind=kind,
        setup=setup,
        workdir=workdir,
        tampered_inputs=tampered_inputs,
        before_candidate=before_candidate,
        gamma=gamma,
    )
    # with host_clock_turns the first paired round says whether the host clock decides;
    # with a reused finding, the first turn session says whether its ratio is too far
    probing = switching or m.host_probe_reused
    next_round, stopped = rounds(last=1 if probing else None)
    if switching and m.baseline and m.baseline[0].event_ms is not None:
        first = m.baseline[0]
        m.baseline_dispatch_bound = dispatch_bound(first.host_ms, first.event_ms, first.dispatch_ms)
    if stopped:
        return m
    if switching and _dispatch_bound(m) and _near_one(m, settings.host_clock_turns_max_ratio):
        setup = _with_turns(setup, settings.host_clock_turns)
        m.host_probe = (m.baseline.pop(), m.candidate.pop())
        m.host_probe_seconds, m.host_probe_phases = m.seconds, dict(m.phase_seconds)
        del m.order[-2:]
        rounds = partial(rounds, kind=_TurnRounds(baseline, candidate, setup), setup=setup)
    elif m.host_probe_reused and _far_turns(m.turn_rounds[-1:], REUSED_TURNS_FAR):
        setup = _with_turns(setup, 0)
        m.turns_set_aside = m.turn_rounds.pop()
        del m.baseline[-1], m.candidate[-1], m.order[-2:]
        rounds = partial(rounds, kind=_PairedRounds(baseline, candidate, setup, None), setup=setup)
    if probing:
        next_round, stopped = rounds(start=next_round)
        if stopped:
            return m
    # the rounds may have stopped on a win the slot order made: if the corrected one
    # would not have stopped them, the rest of the rounds decide it
    correction = _order_controlled(m, baseline, setup, gamma=gamma, workdir=workdir)
    if correction != 1.0 and rounds(correction=correction, start=next_round)[1]:
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
    first_sight: list[str] = field(default_factory=list)  # the candidate side's sets
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
        self.baseline, self.candidate, self.setup = baseline, candidate, setup
        self.prestarted = prestarted

    def enough(self, m: PerfMeasurement, correction: float, gamma: float) -> bool:
        base, cand = corrected_rounds(m, correction)
        # the host clock of one process can misread identical code by more than 2x
        host = rests_on_host_clock(m)
        if len(cand) == 1 and not host and decided_by_one_round(base[0], cand[0], gamma):
            return True
        return rounds_sufficient(
            base,
            cand,
            min_rounds=self.settings.min_rounds,
            spread_target=self.settings.spread_target,
            gamma=gamma,
            decisive_min_rounds=self.settings.host_decisive_rounds if host else 0,
        )

    def settled(self, m: PerfMeasurement, correction: float, gamma: float) -> bool:
        return not noisy_undecided(
            *corrected_rounds(m, correction), gamma=gamma, noise_limit=self.settings.noise_limit
        )

    def play(self, r: int, round_dir: Path, m: PerfMeasurement) -> _PlayedRound:
        outcome = self.prestarted.go() if self.prestarted is not None and r == 0 else None
        job = self.setup.job(self.baseline, self.candidate, round_index=r)
        if outcome is not None and self.prestarted is not None:
            round_dir = self.prestarted.workdir
            m.prestarted = True
        else:
            outcome = run_job(
                job,
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
            first_sight=job.first_sight_sets,
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
        session = self.setup.turn_round(self.baseline, self.candidate, round_dir, round_index=r)
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
            first_sight=self.setup.checks.first_sight(r)[1],
            counted=partial(m.turn_rounds.append, session),
        )


def _measure_rounds(
    m: PerfMeasurement,
    *,
    kind: _RoundKind,
    setup: RoundSetup,
    workdir: Path,
    tampered_inputs: Callable[[], list[str]] | None,
    before_candidate: Callable[[], None] | None,
    gamma: float,
    correction: float = 1.0,
    start: int = 0,
    last: int | None = None,
) -> tuple[int, bool]:
    """``measure``'s rounds from round ``start``, of either kind, with the same checks after each.

    Rounds go on until ``kind.enough`` (the spread is known or the category decided),
    up to ``max_rounds``, and ``noisy_rounds`` more while the noise could still flip the
    category (never past round ``last``, when given); the candidate's numbers are judged
    scaled by ``correction`` (the order control's).  Returns the next round's index and
    whether measuring must stop.
    """
    settings = setup.settings
    if start > 0 and kind.enough(m, correction, gamma):
        return start, False
    end = settings.max_rounds + settings.noisy_rounds
    if last is not None:
        end = min(end, last)
    for r in range(start, end):
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
            first_sight=played.first_sight,
        )
        if len(m.candidate) > kept:
            played.counted()
        if stop:
            return r + 1, True
        if kind.enough(m, correction, gamma):
            return r + 1, False
    return end, False


def _switches_to_turns(settings: GateSettings) -> bool:
    """Gate 4 starts with one paired round and may go on in turn sessions
    (``GateSettings.host_clock_turns``): not with turns throughout, nor with one round."""
    return settings.host_clock_turns > 0 and settings.turn_pairs <= 0 and settings.max_rounds > 1


def _dispatch_bound(m: PerfMeasurement) -> bool:
    """The latest paired round's host sets the pace on either side, not the GPU
    (``dispatch_bound``; a GPU-bound forward's host time runs a hair above its events,
    and turns would only add their harness to it)."""
    return any(
        r.event_ms is not None and dispatch_bound(r.host_ms, r.event_ms, r.dispatch_ms)
        for r in (m.baseline[-1], m.candidate[-1])
    )


def dispatch_bound(host_ms: float, event_ms: float, dispatch_ms: float | None = None) -> bool:
    """The host sets the pace: its time per call, or its time to issue one checked call,
    beyond ``DISPATCH_BOUND`` times the GPU work.

    The second catches a forward that waits for the GPU inside (``.item()``, a branch on
    a value): its events span the host's work too, so they match the host clock, but
    issuing the call outlasts them (it waits out the cover spin queued before it).
    """
    issued = dispatch_ms if dispatch_ms is not None else 0.0
    return max(host_ms, issued) > DISPATCH_BOUND * event_ms


def _near_one(m: PerfMeasurement, limit: float) -> bool:
    """The latest paired round's ratio (baseline over candidate, the gate's numbers) lies
    within ``limit`` either way: where the host clock's regimes could decide the category."""
    base, cand = m.primary(m.baseline[-1]), m.primary(m.candidate[-1])
    return cand > 0 and 1.0 / limit <= base / cand <= limit


def _far_turns(sessions: list[TurnRound], limit: float) -> bool:
    """The turn session's pair ratios have their median beyond ``limit`` either way."""
    ratios = [ratio for session in sessions for ratio in session.ratios]
    return bool(ratios) and not 1.0 / limit <= median(ratios) <= limit


def _with_turns(setup: RoundSetup, pairs: int) -> RoundSetup:
    """``setup`` whose rounds (and A/A controls) are turn sessions of ``pairs`` pairs."""
    return replace(setup, settings=setup.settings.model_copy(update={"turn_pairs": pairs}))


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
    first_sight: list[str],
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
    checked = fewer_than_timed(setup.checks.check(checks_path, first_sight), cand)
    m.checks.append(checked)
    if not checked.ok:
        m.wrong_output = checked
        return True  # its numbers do not count: it did not compute the answer
    m.candidate.append(cand)
    return bool(cand.tampered_before or cand.tampered_after)  # stop spending GPU time


def fewer_than_timed(checked: TimedCheck, side: TimingResult) -> TimedCheck:
    """``checked``, failed when the calls it holds fall short of those the side says it
    made, or of its timed samples: the records must cover every call that was timed."""
    timed = len(side.event_samples) + len(side.first_sight_samples)
    if not checked.ok or checked.calls >= max(timed, side.checked_calls, 1):
        return checked
    return replace(
        checked,
        ok=False,
        reason=(
            f"the timing child's records hold {checked.calls} calls, where it made "
            f"{side.checked_calls} and timed {timed} at least: not every timed call was checked"
        ),
    )


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
    if not m.turn_rounds and (len(m.candidate) < 2 or len(m.baseline) != len(m.candidate)):
        return False
    return not _judged(m, order_correction(m), gamma=gamma, noise_limit=noise_limit).stable
