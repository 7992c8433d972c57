"""Turn sessions (``GateSettings.turn_pairs``): real children on the CPU, hostile ones among them.

Every test here runs a real turn session (two sandboxed children started
through ``gates.runner``, stopped and resumed as the parent asks) on a small CPU
problem; the hostile candidates are ordinary modules that a kernel-writing
agent could write.  Each hostile one runs twice (``launch``): spawned (the
parent signals host PIDs) and forked from the session's sandboxed zygote
(the zygote signals its own children; the two are siblings in its sandbox).
The decision rule itself is tested on numbers.
"""

from __future__ import annotations

import dataclasses
import statistics
import time
from pathlib import Path
from typing import Any

import pytest

from gates.go_signal import live_workdir
from gates.perf import CHECKS_FILE, RoundSetup, measure
from gates.perf_verdict import perf_verdict
from gates.perfstats import turn_decision
from gates.runner import forking_from
from gates.turns import TURN_MS
from kernelopt.contracts.verdicts import GateSettings, GateStatus, PerfCategory
from tests.support.marks import forked_children
from tests.support.turn_sessions import (
    ABBA,
    BASE,
    CHANNEL_WRITER,
    PAIRS,
    SETTINGS,
    run_session,
    write_candidate,
)

pytestmark = forked_children  # how a child starts is not what these tests check

# a forward of about a millisecond of the CPU's own work (a loop, not a sleep: a stopped
# process does no work, while a sleep's deadline passes all the same)
BURN = """
def _burn(n: int = 20000) -> int:
    total = 0
    for i in range(n):
        total += i
    return total
"""


# a thread that counts into a file of its own, in the candidate child's workdir
SPIN = """
import os, threading

def _spin() -> None:
    count = 0
    while True:
        count += 1
        if count % 200 == 0:
            with open("spin.tmp", "w") as f:
                f.write(str(count))
            os.replace("spin.tmp", "spin.count")

threading.Thread(target=_spin, daemon=True).start()
ModelNew = Model
"""


def test_the_identity_through_measure_gives_abba_pairs_and_a_turns_verdict(
    setup: RoundSetup, tmp_path: Path, launch: str
) -> None:
    candidate = write_candidate(tmp_path, "ModelNew = Model\n")
    m = measure(BASE, candidate, setup, workdir=tmp_path / "timing")
    assert m.failure is None and m.wrong_output is None
    (session,) = m.turn_rounds
    assert [side for side, _ in session.turns] == ABBA
    ratios = [x for session in m.pair_ratios() for x in session]
    assert len(ratios) == PAIRS and all(r > 0 for r in ratios)
    # each side's host numbers are the parent's turns, not the child's own
    assert m.candidate[0].host_samples == session.side_turns("candidate")
    assert len(m.candidate[0].turn_ms) == PAIRS  # the child's own, a diagnostic
    assert m.checks[0].ok and m.checks[0].calls >= PAIRS * session.calls
    # the session held the device for its span: the children lived side by side, so it is
    # charged once, not each child's wall time in turn
    assert set(session.outcomes) == {"baseline", "candidate"}
    walls = [o.wall_s for o in session.outcomes.values()]
    assert m.seconds == pytest.approx(session.wall_s)
    assert max(walls) <= session.wall_s < sum(walls)
    # where the span went, step by step, in order and within it
    phases = list(session.phases_s.values())
    assert list(session.phases_s) == [
        "baseline_warmed",
        "candidate_warmed",
        "prepared",
        "calibrated",
        "paired",
        "ended",
        "closed",
    ]
    assert phases == sorted(phases) and phases[-1] <= round(session.wall_s, 4)  # marks: 4 places
    v4, _, _ = perf_verdict(m, settings=SETTINGS, gamma=SETTINGS.gamma, roofline=None)
    assert v4.status == GateStatus.PASS
    assert v4.metrics["turns"]["pairs"] == PAIRS and f"turns: {PAIRS} pairs" in v4.reason
    assert v4.metrics["turns"]["rounds"][0]["phases_s"] == session.phases_s


def test_a_candidates_thread_makes_no_progress_while_the_baseline_takes_its_turn(
    setup: RoundSetup, tmp_path: Path, launch: str
) -> None:
    """The thread counts into a file of its own; the count is read around every turn."""
    candidate = write_candidate(tmp_path, SPIN)
    cand_dir = tmp_path / "session" / "candidate"
    seen: dict[str, list[int]] = {"baseline": [], "candidate": []}
    marks: list[int] = []

    def observe(side: str, edge: str) -> None:
        time.sleep(0.02)  # were the thread running now, it would count on meanwhile
        value = int((live_workdir(cand_dir) / "spin.count").read_text())  # forked: its stage
        if edge == "before":
            marks.append(value)
        else:
            seen[side].append(value - marks.pop())

    run_session(setup, candidate, tmp_path / "session", observe)
    assert len(seen["baseline"]) == PAIRS
    assert seen["baseline"] == [0] * PAIRS  # stopped with its process for every baseline turn
    # and running during its own turns (most of them: on a loaded CPU the thread may not be
    # scheduled within a short one), so the zeros above are the stop, not a dead counter
    assert sum(n > 0 for n in seen["candidate"]) > PAIRS // 2, seen["candidate"]


def test_a_candidate_that_says_done_early_still_pays_for_its_calls(
    setup: RoundSetup, tmp_path: Path, launch: str
) -> None:
    """Its harness is patched to answer synced and done before the calls: the work lands in
    later turns of its own, and its last turn's work in its timed end."""
    candidate = write_candidate(
        tmp_path,
        BURN
        + """
import os
import gates.jobs.turn_side as turn_side

_next = turn_side._Commands.next


def _early_next(self):
    word, seq, arg = _next(self)
    if word == "turn":  # answers synced and done before the turn's calls are made
        fd = os.open("turn_replies", os.O_WRONLY)
        os.write(fd, f"synced {seq}\\ndone {seq}\\n".encode())
        os.close(fd)
        _in_turns[0] = True  # from here every call is a turn's: its work must be charged
    return word, seq, arg


def _install():  # again at every call: the harness watch puts the originals back
    turn_side._Commands.next = _early_next


_install()


import time as _time

_cpu = [0.0]
_in_turns = [False]


class ModelNew(Model):
    def forward(self, x):
        _install()
        t0 = _time.thread_time()
        _burn()
        if _in_turns[0]:  # warm-up and settling calls are not timed by turns
            _cpu[0] += _time.thread_time() - t0
            with open(os.path.join(_HOME, "burn_cpu.txt"), "w") as out:
                out.write(repr(_cpu[0]))
        return x * self.scale


_HOME = os.getcwd()
""",
    )
    pairs = 2  # the last turn's work is half of it: its loss would show plainly
    session = run_session(setup, candidate, tmp_path / "session", pairs=pairs)
    cand_dir = tmp_path / "session" / "candidate"
    burned = next(
        d / "burn_cpu.txt"
        for d in (cand_dir, live_workdir(cand_dir))
        if (d / "burn_cpu.txt").is_file()
    )
    # the CPU time its calls' work took, as the child's own thread clock saw it: a stopped
    # process spends none, and a loaded machine only stretches the parent's wall time
    work_ms = float(burned.read_text()) * 1e3
    charged_ms = sum(session.side_turns("candidate")) * session.calls
    # its first turn did almost none of it; without the timed end, its last turn's work
    # (half) would be done after the session, untimed: about 0.5 on an idle machine (a
    # machine loaded beyond two runnable processes a CPU can stretch the windows past 0.9)
    assert charged_ms >= 0.9 * work_ms, (charged_ms, work_ms)


def test_the_baseline_child_never_sees_the_candidates_module(
    setup: RoundSetup, tmp_path: Path, launch: str
) -> None:
    candidate = write_candidate(
        tmp_path,
        """
import os
open(f"imported.{os.getpid()}", "w").close()  # in the importing child's workdir
ModelNew = Model
""",
    )
    run_session(setup, candidate, tmp_path / "session")
    base_dir, cand_dir = tmp_path / "session" / "baseline", tmp_path / "session" / "candidate"
    assert list(cand_dir.glob("imported.*"))  # the marker works
    assert not list(base_dir.glob("imported.*"))
    assert "candidate.py" not in (base_dir / "job.json").read_text()
    assert (cand_dir / CHECKS_FILE).is_file() and not (base_dir / CHECKS_FILE).exists()


def test_a_candidate_finds_no_channel_of_the_baselines_to_write_into(
    setup: RoundSetup, tmp_path: Path, launch: str
) -> None:
    """Forked, the children are siblings that see each other's stages; the baseline's FIFOs
    are unlinked before the candidate's ``start``, so an injected ``end`` reaches nobody."""
    candidate = write_candidate(tmp_path, CHANNEL_WRITER)
    run_session(setup, candidate, tmp_path / "session")
    assert (tmp_path / "session" / "candidate" / "reached.txt").read_text() == ""


def test_a_candidate_that_dies_in_a_turn_fails_the_round_as_the_candidates(
    setup: RoundSetup, tmp_path: Path, launch: str
) -> None:
    candidate = write_candidate(
        tmp_path,
        """
import os
import gates.jobs.turn_side as turn_side

_next = turn_side._Commands.next


def _dies_in_a_turn(self):
    word, seq, arg = _next(self)
    if word == "turn":
        os._exit(3)
    return word, seq, arg


class ModelNew(Model):
    def forward(self, x):
        turn_side._Commands.next = _dies_in_a_turn  # at every call: the watch puts it back
        return super().forward(x)
""",
    )
    m = measure(BASE, candidate, setup, workdir=tmp_path / "timing")
    assert m.failure is not None
    side, outcome = m.failure
    assert side == "candidate" and outcome.status == "crashed"
    v4, _, _ = perf_verdict(m, settings=SETTINGS, gamma=SETTINGS.gamma, roofline=None)
    assert v4.status == GateStatus.ERROR and not v4.metrics.get("infrastructure")


def test_the_pairs_median_decides_and_their_middle_half_is_the_noise() -> None:
    steady = [1.0, 1.01, 0.99, 1.0, 1.02, 0.98, 1.0, 1.6]  # one pair across a regime change
    d = turn_decision([steady], [0.05] * 8, [0.05] * 8, gamma=1.03, noise_limit=0.10)
    assert d.category == PerfCategory.MATCHED and d.stable and d.noise < 0.05
    assert "turns: 8 pairs" in d.reason and "1 session" in d.reason
    win = [1.2, 1.25, 1.22, 1.18, 1.3, 0.9, 1.21, 1.24]
    d = turn_decision([win], [0.06] * 8, [0.05] * 8, gamma=1.03, noise_limit=0.10)
    assert d.category == PerfCategory.OPTIMIZED and d.decisive
    assert d.speedup == pytest.approx(1.215)
    wild = [0.6, 1.5, 0.8, 1.3, 1.0, 0.7, 1.4, 1.1]
    d = turn_decision([wild], [0.05] * 8, [0.05] * 8, gamma=1.03, noise_limit=0.10)
    assert not d.stable


def _pairs_around(center: float, width: float = 0.02, pairs: int = 20) -> list[float]:
    """One session's pair ratios: +-``width`` around its own ``center`` (the H200's turns)."""
    return [center * (1.0 + width * ((i % 5) - 2) / 2) for i in range(pairs)]


def test_a_session_is_the_unit_each_pair_of_processes_keeps_its_offset() -> None:
    """The identity on the H200 (docs/TEAM_NOTES.md, twentieth session): session medians
    1.031, 1.030 and 0.988, each session's pairs within about +-2%.  Pooled pairs would
    read a 3% win; the sessions' disagreement is the noise, so it is matched."""
    identity = [_pairs_around(1.031), _pairs_around(1.030), _pairs_around(0.988)]
    d = turn_decision(identity, [0.05] * 60, [0.05] * 60, gamma=1.03, noise_limit=0.10)
    assert d.category == PerfCategory.MATCHED and d.stable and not d.decisive
    assert d.noise == pytest.approx((1.031 - 0.988) / 1.030, rel=0.05)
    assert "3 session(s)" in d.reason and "session medians 0.988x to 1.03x" in d.reason
    # four lucky pairs of processes and one honest one, each tight: the pooled pairs'
    # middle half lies inside the lucky four (a 4% "win"); the sessions disagree by 5%
    lucky = [_pairs_around(1.04, 0.005)] * 4 + [_pairs_around(0.99, 0.005)]
    d = turn_decision(lucky, [0.05] * 100, [0.05] * 100, gamma=1.03, noise_limit=0.10)
    assert d.category == PerfCategory.MATCHED and not d.decisive
    real = [_pairs_around(1.20), _pairs_around(1.15), _pairs_around(1.22)]
    d = turn_decision(real, [0.06] * 60, [0.05] * 60, gamma=1.03, noise_limit=0.10)
    assert d.category == PerfCategory.OPTIMIZED and d.decisive


def test_with_enough_sessions_the_medians_interval_is_the_noise() -> None:
    """The identity on the H200 (docs/TEAM_NOTES.md, twenty-first session): ten sessions,
    medians 0.917x-1.053x, each session's pairs spread by +-10%.  The pairs'
    own spread or the medians' range would quarantine identical code; the interval of
    the median is what the estimate is uncertain by."""
    medians = [0.938, 0.977, 0.989, 0.987, 0.992, 1.023, 0.917, 1.053, 0.985, 1.010]
    identity = [_pairs_around(m, 0.10, 10) for m in medians]
    d = turn_decision(identity, [0.5] * 120, [0.5] * 120, gamma=1.03, noise_limit=0.10)
    assert d.category == PerfCategory.MATCHED and d.stable
    assert d.noise == pytest.approx((1.023 - 0.938) / 0.988, rel=0.02)  # 2nd to 9th of ten
    assert "95% interval of their median 0.938x to 1.02x" in d.reason
    # the rule for few sessions would have quarantined it
    few = turn_decision(identity[:4], [0.5] * 48, [0.5] * 48, gamma=1.03, noise_limit=0.10)
    assert not few.stable
    # seven lucky pairs of processes and three honest ones: a lucky median, but the
    # interval reaches down to the honest ones, so it is no win
    lucky = [_pairs_around(1.04, 0.005)] * 7 + [_pairs_around(0.99, 0.005)] * 3
    d = turn_decision(lucky, [0.05] * 200, [0.05] * 200, gamma=1.03, noise_limit=0.10)
    assert d.speedup == pytest.approx(1.04) and d.category == PerfCategory.MATCHED
    real = [_pairs_around(m, 0.10, 10) for m in (1.2, 1.15, 1.22, 1.18, 1.25, 1.17)]
    d = turn_decision(real, [0.06] * 72, [0.05] * 72, gamma=1.03, noise_limit=0.10)
    assert d.category == PerfCategory.OPTIMIZED and d.decisive


def test_the_median_interval_keeps_its_coverage() -> None:
    from gates.perfstats import median_interval

    assert median_interval([3.0, 1.0, 2.0]) == (1.0, 3.0)  # too few: the range
    assert median_interval(list(range(8))) == (0, 7)  # 2nd-7th would cover only 93%
    assert median_interval(list(range(10))) == (1, 8)  # 97.9%
    assert median_interval(list(range(12))) == (2, 9)  # 96.1%


def _turn_round(ratio: float, event_ms: float = 0.01):
    """A finished session whose every pair reads ``ratio`` (host-bound: turns above events)."""
    from gates.protocol import TimingResult
    from gates.turns import TurnRound

    base_turns, cand_turns = [0.05] * PAIRS, [0.05 / ratio] * PAIRS

    def side(name: str, turns: list[float]) -> TimingResult:
        return TimingResult(
            side=name, event_ms=event_ms, event_samples=[event_ms] * 5, host_ms=turns[0]
        ).model_copy(update={"host_samples": turns})

    return TurnRound(
        baseline=side("baseline", base_turns),
        candidate=side("candidate", cand_turns),
        ratios=[ratio] * PAIRS,
        calls=100,
    )


def _finished_session(ratio: float):
    """``_turn_round`` as ``run_turn_round`` returns it: both children ended, each 1 s of
    wall time, summed into the session's GPU-seconds."""
    from gates.runner import ChildOutcome

    session = _turn_round(ratio)
    session.outcomes = {
        side: ChildOutcome(status="ok", phase="save_checks", wall_s=1.0)
        for side in ("baseline", "candidate")
    }
    session.wall_s = 2.0
    return session


def test_turns_replace_paired_rounds_only_when_asked_and_keep_the_order_control(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Default settings never start a turn session; with turns, a win the host clock decides
    is checked against A/A turn sessions, whose ratio is taken off the speedup."""
    import gates.perf as perf
    from gates.runner import ChildOutcome
    from tests.support.paired_timing import measure_on

    sessions: list[tuple[str, str]] = []

    def turn_round(base_job, cand_job, workdir, **_):
        # every session reads 1.25x, the A/A ones too: the order (here, the child) alone
        sessions.append((base_job.model.kind, cand_job.model.kind))
        return _finished_session(1.25)

    def paired(*_a, **_k):
        return ChildOutcome(status="crashed", phase="start", wall_s=0.1)

    monkeypatch.setattr(perf, "run_turn_round", turn_round)
    m = measure_on(paired, monkeypatch, min_rounds=1, max_rounds=1)
    assert not sessions and m.failure is not None  # turn_pairs=0: the paired child ran
    m = measure_on(paired, monkeypatch, min_rounds=2, max_rounds=2, turn_pairs=PAIRS)
    assert sessions[:2] == [("eager", "candidate")] * 2
    assert sessions[2:] == [("eager", "eager")] * 2  # A/A: trusted code in both children
    assert m.failure is None and sum(len(x) for x in m.pair_ratios()) == 2 * PAIRS
    assert m.seconds == pytest.approx(4 * 2.0)  # every session's GPU-seconds, the A/A ones too
    settings = GateSettings(device="cuda", min_rounds=2, max_rounds=2, turn_pairs=PAIRS)
    v4, category, speedup = perf_verdict(m, settings=settings, gamma=1.03, roofline=None)
    assert category == PerfCategory.MATCHED and speedup == pytest.approx(1.0)
    assert "order control" in v4.reason and "turns: 8 pairs" in v4.reason
    assert v4.metrics["order_control"]["pair_ratios"] == [1.25] * 2 * PAIRS


def _paired_child(
    event_ms: float,
    host_ms: float,
    candidate_host_ms: float | None = None,
    dispatch_ms: float | None = None,
):
    """A stand-in for paired timing children: both sides read ``event_ms`` / ``host_ms``
    (the candidate ``candidate_host_ms`` where given) and issue a call in ``dispatch_ms``."""
    from gates.protocol import TimingResult
    from gates.runner import ChildOutcome

    def side(name: str, ms: float) -> TimingResult:
        return TimingResult(
            side=name,
            event_ms=event_ms,
            event_samples=[event_ms] * 5,
            host_ms=ms,
            dispatch_ms=dispatch_ms,
        )

    def child(*_a, **_k):
        cand = side("candidate", host_ms if candidate_host_ms is None else candidate_host_ms)
        result = cand.model_copy(update={"baseline": side("baseline", host_ms)})
        return ChildOutcome(
            status="ok", phase="save_checks", wall_s=1.0, result=result.model_dump(mode="json")
        )

    return child


@pytest.mark.parametrize(
    ("event_ms", "host_ms", "candidate_host_ms", "dispatch_ms", "turns"),
    [
        (0.01, 0.05, None, 0.004, True),
        (0.05, 0.01, None, 0.004, False),
        (0.05, 0.051, None, 0.004, False),
        (0.01, 0.05, 0.005, 0.004, False),
        (0.04, 0.041, None, 0.3, True),
        (0.04, 0.041, None, None, False),
    ],
    ids=[
        "dispatch-bound",
        "gpu-bound",
        "gpu-bound-host-a-hair-above",
        "dispatch-bound-5x-apart",
        "waits-for-the-gpu-inside",
        "no-dispatch-time-known",
    ],
)
def test_host_clock_turns_replace_the_rounds_only_of_a_forward_the_host_clock_decides(
    monkeypatch: pytest.MonkeyPatch,
    event_ms: float,
    host_ms: float,
    candidate_host_ms: float | None,
    dispatch_ms: float | None,
    turns: bool,
) -> None:
    """With ``host_clock_turns`` the first paired round decides the kind: a dispatch-bound
    forward goes on in turn sessions (the paired round set aside, and said so); a GPU-bound
    one keeps its paired rounds, and no turn session starts (also when its host time runs a
    hair above its events, as a GPU-bound forward's does).  A forward that waits for the
    GPU inside (``.item()``) has events as long as its host time, but issuing one call
    outlasts them: it goes to turns too.  Nor does a round whose sides
    lie further apart than ``host_clock_turns_max_ratio`` (4x), where no clock regime
    could change the category and the turns' harness work would pull the ratio towards 1."""
    import gates.perf as perf
    from tests.support.paired_timing import measure_on

    sessions: list[tuple[str, str]] = []

    def turn_round(base_job, cand_job, workdir, **kwargs):
        sessions.append((base_job.model.kind, cand_job.model.kind))
        assert kwargs["pairs"] == PAIRS
        return _finished_session(1.0)

    monkeypatch.setattr(perf, "run_turn_round", turn_round)
    child = _paired_child(event_ms, host_ms, candidate_host_ms, dispatch_ms)
    settings = {"min_rounds": 2, "max_rounds": 4, "host_clock_turns": PAIRS}
    m = measure_on(child, monkeypatch, **settings)
    assert m.failure is None
    if not turns:
        assert not sessions and m.host_probe is None and len(m.candidate) == 2
        return
    assert sessions and set(sessions) == {("eager", "candidate")}
    assert m.host_probe is not None and m.host_probe[1].host_ms == host_ms
    assert len(m.turn_rounds) == len(sessions) == len(m.candidate)  # the probe is not one
    assert m.seconds == pytest.approx(1.0 + 2.0 * len(sessions))  # the probe's time counts
    v4, category, _ = perf_verdict(
        m, settings=GateSettings(device="cuda", **settings), gamma=1.03, roofline=None
    )
    assert category == PerfCategory.MATCHED, v4.reason
    assert "rested on the host clock" in v4.reason and "host_probe" in v4.metrics
    assert v4.metrics["host_probe"]["seconds"] == pytest.approx(1.0)  # the probe child alone


@pytest.mark.parametrize(
    "event_ms, host_ms, dispatch_ms, found",
    [(0.01, 0.05, 0.004, True), (0.05, 0.051, 0.004, False), (0.04, 0.041, 0.3, True)],
)
def test_the_first_paired_round_says_whether_the_baseline_is_dispatch_bound(
    monkeypatch: pytest.MonkeyPatch,
    event_ms: float,
    host_ms: float,
    dispatch_ms: float,
    found: bool,
) -> None:
    """What the reference keeps for later verdicts: the baseline side of the first paired
    round, timed before any candidate code was loaded."""
    import gates.perf as perf
    from tests.support.paired_timing import measure_on

    monkeypatch.setattr(perf, "run_turn_round", lambda *a, **k: _finished_session(1.0))
    settings = {"min_rounds": 2, "max_rounds": 4, "host_clock_turns": PAIRS}
    child = _paired_child(event_ms, host_ms, dispatch_ms=dispatch_ms)
    m = measure_on(child, monkeypatch, **settings)
    assert m.baseline_dispatch_bound is found and not m.host_probe_reused


@pytest.mark.parametrize("reuse", [True, False])
def test_a_baseline_known_to_be_dispatch_bound_goes_to_turns_without_a_probe_round(
    monkeypatch: pytest.MonkeyPatch, reuse: bool
) -> None:
    """With ``reuse_host_probe`` an earlier verdict's finding spares this one its paired probe
    round: no paired child runs, turn sessions decide from the first, and the verdict says
    why; without the lever the probe round runs as before."""
    import gates.perf as perf
    from tests.support.paired_timing import measure_on

    paired: list[int] = []
    child = _paired_child(0.01, 0.05)

    def counted(*a: Any, **k: Any) -> Any:
        paired.append(1)
        return child(*a, **k)

    monkeypatch.setattr(perf, "run_turn_round", lambda *a, **k: _finished_session(1.0))
    settings = {
        "min_rounds": 2,
        "max_rounds": 4,
        "host_clock_turns": PAIRS,
        "reuse_host_probe": reuse,
    }
    m = measure_on(counted, monkeypatch, baseline_dispatch_bound=True, **settings)
    v4, category, _ = perf_verdict(
        m, settings=GateSettings(device="cuda", **settings), gamma=1.03, roofline=None
    )
    assert category == PerfCategory.MATCHED and m.turn_rounds
    if reuse:
        assert not paired and m.host_probe is None and m.host_probe_reused
        assert v4.metrics["host_probe"] == {"reused": True} and "earlier verdict" in v4.reason
    else:
        assert len(paired) == 1 and m.host_probe is not None and not m.host_probe_reused


def test_a_reused_finding_whose_turns_read_a_far_ratio_goes_back_to_paired_rounds(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Turns pull a far ratio towards 1, so a first turn session beyond 2x either way is set
    aside and paired rounds decide, as the probe round would have chosen."""
    import gates.perf as perf
    from tests.support.paired_timing import measure_on

    sessions: list[float] = []

    def turn_round(*_a: Any, **_k: Any) -> Any:
        sessions.append(3.0)
        return _finished_session(3.0)

    monkeypatch.setattr(perf, "run_turn_round", turn_round)
    settings = {"min_rounds": 2, "max_rounds": 4, "host_clock_turns": PAIRS}
    settings |= {"reuse_host_probe": True, "order_control_rounds": 0}  # the double's A/A: 5x
    child = _paired_child(0.01, 0.05, candidate_host_ms=0.01)  # paired rounds read 5x
    m = measure_on(child, monkeypatch, baseline_dispatch_bound=True, **settings)
    assert sessions == [3.0] and not m.turn_rounds and m.turns_set_aside is not None
    assert len(m.candidate) >= 2  # paired rounds from then on
    v4, category, speedup = perf_verdict(
        m, settings=GateSettings(device="cuda", **settings), gamma=1.03, roofline=None
    )
    assert category == PerfCategory.OPTIMIZED and speedup == pytest.approx(5.0), v4.reason
    assert v4.metrics["host_probe"]["turns_set_aside"] == [3.0] * PAIRS
    assert "too far for turns" in v4.reason


def test_host_clock_turns_stay_out_of_one_round_timings(monkeypatch: pytest.MonkeyPatch) -> None:
    """A one-round timing (the campaign's kernel speedup) has no rounds left to switch to."""
    import gates.perf as perf
    from tests.support.paired_timing import measure_on

    monkeypatch.setattr(perf, "run_turn_round", lambda *a, **k: pytest.fail("a turn session"))
    m = measure_on(
        _paired_child(0.01, 0.05), monkeypatch, min_rounds=1, max_rounds=1, host_clock_turns=PAIRS
    )
    assert m.host_probe is None and len(m.candidate) == 1


def test_the_call_count_follows_the_baseline_not_the_candidates_estimate(
    setup: RoundSetup, tmp_path: Path
) -> None:
    """A slow candidate (or one that reports a large estimate) does not shorten the turns:
    short turns are mostly fixed overhead, which pulls every ratio towards 1, so a slower
    candidate would read matched."""
    slow = write_candidate(
        tmp_path,
        "import time\n\n\nclass ModelNew(Model):\n"
        "    def forward(self, *args):\n"
        "        time.sleep(0.005)\n"
        "        return super().forward(*args)\n",
    )
    session = run_session(setup, slow, tmp_path / "slow", pairs=2)
    per_call_ms = statistics.median(session.side_turns("candidate"))
    assert session.calls * per_call_ms > 3 * TURN_MS  # its turns last its own slowness


def test_a_session_forked_by_the_workers_shared_zygote_stops_the_candidates_thread(
    setup: RoundSetup, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Through the worker's zygote service: stop, cont and pin travel on each job's own
    connection; the thread still makes no progress during the baseline's turns."""
    from gates.zygote_service import DEVICE_ENV, SOCKET_ENV, ZygoteService

    service = ZygoteService("cpu", str(tmp_path / "z.sock"))
    service.start(probe=False)
    monkeypatch.setenv(SOCKET_ENV, service.path)
    monkeypatch.setenv(DEVICE_ENV, "cpu")
    candidate = write_candidate(tmp_path, SPIN)
    cand_dir = tmp_path / "session" / "candidate"
    moved: dict[str, list[int]] = {"baseline": [], "candidate": []}
    marks: list[int] = []

    def observe(side: str, edge: str) -> None:
        time.sleep(0.02)
        value = int((live_workdir(cand_dir) / "spin.count").read_text())
        if edge == "before":
            marks.append(value)
        else:
            moved[side].append(value - marks.pop())

    try:
        with forking_from("cpu", None):
            jobs = service.jobs
            run_session(setup, candidate, tmp_path / "session", observe)
            assert service.jobs == jobs + 2  # both children forked by the service
    finally:
        service.close()
    assert moved["baseline"] == [0] * PAIRS and all(n > 0 for n in moved["candidate"])


def test_a_turn_win_the_control_takes_back_gets_the_sessions_it_stopped_short_of(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """One session at 2.5x decides alone; A/A sessions at 1.25x leave 2.0x, which does not,
    so the sessions go on, judged on corrected ratios, as paired rounds do."""
    import gates.perf as perf
    from tests.support.paired_timing import measure_on

    timed: list[str] = []

    def turn_round(base_job, cand_job, workdir, **_):
        timed.append(cand_job.model.kind)
        if cand_job.model.kind == "eager":
            ratio = 1.25  # A/A: the order alone
        else:
            ratio = 2.5 if timed.count("candidate") == 1 else 1.6
        return _finished_session(ratio)

    monkeypatch.setattr(perf, "run_turn_round", turn_round)
    m = measure_on(lambda *a, **k: None, monkeypatch, min_rounds=2, max_rounds=4, turn_pairs=PAIRS)
    assert timed[:2] == ["candidate", "eager"]  # decided alone, then the control
    # without the correction: one session; with it, a second that agrees on a win
    assert timed.count("candidate") == 2
    settings = GateSettings(device="cuda", min_rounds=2, max_rounds=4, turn_pairs=PAIRS)
    v4, category, speedup = perf_verdict(m, settings=settings, gamma=1.03, roofline=None)
    assert category == PerfCategory.OPTIMIZED, v4.reason
    assert speedup == pytest.approx((2.5 + 1.6) / 2 / 1.25)  # the sessions' median, corrected


def test_a_brief_prep_caps_each_sides_event_samples(setup: RoundSetup, tmp_path: Path) -> None:
    """``turn_prep_calls``: each child prepares with at most that many sampled calls (and no
    settling steps on the GPU); the turns themselves are as many as ever."""
    candidate = write_candidate(tmp_path, "ModelNew = Model\n")

    def prepared(calls: int) -> RoundSetup:
        update = {"turn_prep_calls": calls}
        return dataclasses.replace(setup, settings=setup.settings.model_copy(update=update))

    full = run_session(prepared(0), candidate, tmp_path / "full")
    short = run_session(prepared(4), candidate, tmp_path / "brief")
    for side in ("baseline", "candidate"):
        assert len(getattr(full, side).event_samples) > 4
        assert 0 < len(getattr(short, side).event_samples) <= 4
    assert len(short.turns) == len(full.turns) == 2 * PAIRS
