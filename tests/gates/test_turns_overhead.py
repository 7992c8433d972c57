"""A turn's harness overhead (``gates.turns``): calls per turn from the parent-timed baseline,
and the record phase taken off each turn only up to the baseline's own.

Real sessions of two sandboxed children on the CPU, as in ``test_turns.py``: a
baseline whose records cost many times its forward (many small outputs) gets
its call count from its parent-timed turns, never from its own estimate nor
the candidate's; a candidate that answers ``synced`` before its work is
charged for that work; an honest identical pair still reads about 1.
"""

from __future__ import annotations

import random
import statistics
from pathlib import Path

import pytest

from gates.cascade import round_setup
from gates.perf import RoundSetup
from gates.protocol import ModelSource
from gates.timers import calls_for
from gates.turns import TURN_MS, TurnRound, _charged, _Turn
from tests.support.marks import forked_children
from tests.support.turn_sessions import (
    PROBLEM,
    PROBLEMS,
    SETTINGS,
    reference,
    run_session,
    write_candidate,
)

pytestmark = forked_children  # how a child starts is not what these tests check

DEEP = PROBLEMS / "deep_residual.py"  # 32 small layers
WIDE = PROBLEMS / "many_outputs.py"  # 48 outputs of one multiply: the records dominate a call


# its child reports a call of a second: were the count taken from it, a turn would be 3 calls
LIAR = """
import gates.jobs.turn_side as _turn_side

_reply = _turn_side._Commands.reply


def _lying_reply(self, line):
    if line.startswith("ready "):
        line = " ".join([*line.split()[:2], "1000"])
    _reply(self, line)


class ModelNew(Model):
    def forward(self, x):
        _turn_side._Commands.reply = _lying_reply  # at every call: the watch puts it back
        return super().forward(x)
"""

# late work well beyond a baseline record phase on a loaded CPU, so
# the margin below cannot be eaten by the credit the baseline's records allow
LATE_MS = 60.0
# says synced before its calls, then works on (a sleep stands for late work): everything
# after ``synced`` is its "record phase"
EARLY_SYNCED = f"""
import os
import time
import gates.jobs.turn_side as _turn_side

_next = _turn_side._Commands.next
LATE_S = {LATE_MS / 1000}


def _early_synced(self):
    word, seq, arg = _next(self)
    if word == "turn":  # says synced before its turn's work, then works late
        fd = os.open("turn_replies", os.O_WRONLY)
        os.write(fd, f"synced {{seq}}\\n".encode())
        os.close(fd)
        time.sleep(LATE_S)
    return word, seq, arg


class ModelNew(Model):
    def forward(self, x):
        _turn_side._Commands.next = _early_synced  # at every call: the watch puts it back
        return super().forward(x)
"""


def _side_rows(session: TurnRound, side: str) -> list[tuple[float, float, float]]:
    """(window, record phase, taken off) in ms of each of ``side``'s turns."""
    rows = zip(session.windows_ms, session.records_ms, session.taken_off_ms, strict=True)
    return [(w, r, off) for (s, w), r, off in rows if s == side]


def test_the_call_count_follows_the_parent_timed_baseline_turn_not_any_estimate(
    gates_env: Path, tmp_path_factory: pytest.TempPathFactory, tmp_path: Path
) -> None:
    """The baseline's estimate leaves out its records (here most of a call), so a turn at its
    count would last several times ``TURN_MS``; the candidate's ``ready`` lies and counts
    for nothing.  Batched records (``record_batch``) narrowed that gap on a loaded CPU (the
    parent-timed turn read 1.46x the estimate in one CI run, three times and more when idle),
    so the bounds ask only that the count follow the parent's clock and fall below the
    estimate's."""
    setup = round_setup(reference(tmp_path_factory, WIDE), SETTINGS)
    base = ModelSource(kind="eager", problem_path=str(WIDE))
    liar = write_candidate(tmp_path, LIAR, problem=WIDE)
    session = run_session(setup, liar, tmp_path / "session", pairs=2, base=base)
    assert session.estimates_ms["candidate"] == 1000.0  # the lie reached the parent
    assert session.calls_raw == calls_for(session.estimates_ms["baseline"], TURN_MS)
    assert 3 < session.calls < session.calls_raw
    assert session.calls == calls_for(session.calibration_ms[-1], TURN_MS)
    # the parent's clock sees the harness: the calibration the count follows (the last; the
    # first may still be warming up on a loaded CPU) is above the child's estimate
    assert session.calibration_ms[-1] > session.estimates_ms["baseline"], (
        session.calibration_ms,
        session.estimates_ms,
    )
    # calibration turns are in no ratio: ABBA pairs only
    assert [side for side, _ in session.windows_ms] == [
        "baseline",
        "candidate",
        "candidate",
        "baseline",
    ]


def test_a_candidate_that_says_synced_early_is_charged_its_late_work(
    setup: RoundSetup, tmp_path: Path, launch: str
) -> None:
    """Its whole turn follows a forged ``synced``: at most the baseline's record time comes
    off, so its late work stays charged and it reads slower (had its own record phase come
    off, only the command's round trip would be left and it would read far faster)."""
    candidate = write_candidate(tmp_path, EARLY_SYNCED)
    session = run_session(setup, candidate, tmp_path / "session", record_credit=True)
    assert statistics.median(session.ratios) < 0.75, session.ratios
    baseline_records = [r for _, r, _ in _side_rows(session, "baseline")]
    for _, record, off in _side_rows(session, "candidate"):
        assert off <= max(baseline_records)  # never more than the baseline's own
        # its late work was in its "record phase" (less the time ``synced`` took to reach the
        # parent on a loaded CPU; without the late work it would be a few ms)
        assert record >= 0.5 * LATE_MS
    charged = {
        side: statistics.median(w - off for w, _, off in _side_rows(session, side))
        for side in ("baseline", "candidate")
    }
    assert charged["candidate"] - charged["baseline"] >= 0.5 * LATE_MS, charged


def test_an_identical_pair_reads_one_and_its_record_phases_come_off(
    gates_env: Path, tmp_path_factory: pytest.TempPathFactory, tmp_path: Path
) -> None:
    """A forward of many small ops (its own work most of a turn, as a ratio wants): the
    identity reads about 1, each turn charged less than its raw window."""
    setup = round_setup(reference(tmp_path_factory, DEEP), SETTINGS)
    base = ModelSource(kind="eager", problem_path=str(DEEP))
    identity = write_candidate(tmp_path, "ModelNew = Model\n", problem=DEEP)
    session = run_session(setup, identity, tmp_path / "s", pairs=8, base=base, record_credit=True)
    assert 0.67 < statistics.median(session.ratios) < 1.5, session.ratios
    for (side, per_call), (_, window), off in zip(
        session.turns, session.windows_ms, session.taken_off_ms, strict=True
    ):
        assert 0 < off < window, side  # charged less than its raw window, never nothing
        assert per_call * session.calls == pytest.approx(window - off)
    # the baseline's own record phases are what may come off: its median, at most
    records = [r for _, r, _ in _side_rows(session, "baseline")]
    assert max(off for _, _, off in _side_rows(session, "candidate")) <= max(records)


def test_without_the_credit_every_window_is_charged_whole(
    gates_env: Path, tmp_path_factory: pytest.TempPathFactory, tmp_path: Path
) -> None:
    """``record_credit`` off (``GateSettings.turn_record_credit=False``): records stay in
    the charge."""
    setup = round_setup(reference(tmp_path_factory, DEEP), SETTINGS)
    base = ModelSource(kind="eager", problem_path=str(DEEP))
    identity = write_candidate(tmp_path, "ModelNew = Model\n", problem=DEEP)
    session = run_session(setup, identity, tmp_path / "s", pairs=2, base=base)
    assert session.taken_off_ms == [0.0] * len(session.turns)
    for (_, per_call), (_, window) in zip(session.turns, session.windows_ms, strict=True):
        assert per_call * session.calls == pytest.approx(window)


def test_a_turn_holds_no_more_outputs_than_its_bound(
    gates_env: Path, tmp_path_factory: pytest.TempPathFactory, tmp_path: Path
) -> None:
    """A turn keeps every call's outputs until its records: a bound of five calls' outputs
    caps its calls, on both sides, however fast the forward (a large, fast output would
    otherwise fill the device with up to 1,000 of them)."""
    from gates.checked_calls import output_bytes

    setup = round_setup(reference(tmp_path_factory, PROBLEM), SETTINGS)
    identity = write_candidate(tmp_path, "ModelNew = Model\n")
    free = run_session(setup, identity, tmp_path / "free", pairs=1)
    assert free.calls > 5, free.calls  # the bound below is what caps the next session
    bound = 5 * output_bytes(setup.checks.expected)
    session = run_session(setup, identity, tmp_path / "s", pairs=2, held_output_bytes=bound)
    assert session.calls_raw <= 5 and session.calls <= 5, (session.calls_raw, session.calls)
    for side in ("baseline", "candidate"):
        result = getattr(session, side)
        assert result is not None and result.host_calls_per_batch <= 5


def _abba(records: list[tuple[float, float]]) -> list[_Turn]:
    """Turns in ABBA order, pair i's (baseline, candidate) record phases in ms, 30 ms windows."""
    turns: list[_Turn] = []
    for i, (base, cand) in enumerate(records):
        pair = [_Turn("baseline", 30_000_000, int(base * 1e6))]
        pair.append(_Turn("candidate", 30_000_000, int(cand * 1e6)))
        turns += pair if i % 2 == 0 else pair[::-1]
    return turns


def _credit(turns: list[_Turn], taken: list[int], side: str) -> int:
    return sum(off for t, off in zip(turns, taken, strict=True) if t.side == side)


def test_both_sides_with_the_same_record_phases_get_the_same_credit() -> None:
    """The allowance comes from the baseline's turns in the other pairs: a baseline turn's own
    record phase never raises what comes off it (a median over the baseline's turns so far,
    its own among them, gave the baseline 1 ms more here, and an identity ~0.3% on the H200)."""
    turns = _abba([(4.0, 4.0), (6.0, 6.0)])  # B4 C4 | C6 B6: the same records on both sides
    taken = _charged(turns, True)
    assert _credit(turns, taken, "baseline") == _credit(turns, taken, "candidate")
    # pair i's two turns face one allowance, the other pairs' baseline median
    assert taken == [4_000_000, 4_000_000, 4_000_000, 4_000_000]


def test_record_phases_alike_on_both_sides_come_off_alike_on_average() -> None:
    """Record phases drawn alike for both sides (lognormal, 12 ABBA pairs, many sessions):
    the credit each side gets differs by noise only, not by a bias towards the baseline."""
    rng = random.Random(7)
    gaps = []
    for _ in range(400):
        records = [
            (rng.lognormvariate(0, 0.3) * 5, rng.lognormvariate(0, 0.3) * 5) for _ in range(12)
        ]
        turns = _abba(records)
        taken = _charged(turns, True)
        gaps.append((_credit(turns, taken, "baseline") - _credit(turns, taken, "candidate")) / 60e6)
    # the rule with the baseline's own record in its median: about +0.05 of a record phase
    assert abs(statistics.mean(gaps)) < 0.01, statistics.mean(gaps)


def test_a_lone_pair_gets_no_credit() -> None:
    """One pair has no other pairs to set the allowance: both windows are charged whole."""
    turns = _abba([(4.0, 3.0)])
    assert _charged(turns, True) == [0, 0]
