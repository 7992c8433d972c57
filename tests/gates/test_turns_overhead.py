"""A turn's harness overhead (``gates.turns``): the record phase taken off each turn only up to
the baseline's own.

Real sessions of two sandboxed children on the CPU, as in ``test_turns.py``: a
candidate that answers ``synced`` before its work is charged for that work; an
honest identical pair still reads about 1.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterator
from pathlib import Path

import pytest

from gates.cascade import round_setup
from gates.perf import RoundSetup
from gates.protocol import ModelSource
from gates.reference import ReferenceBundle
from gates.turns import TurnRound
from tests.support.turn_sessions import (
    LAUNCHES,
    PROBLEMS,
    SETTINGS,
    launching,
    reference,
    run_session,
    write_candidate,
)

DEEP = PROBLEMS / "deep_residual.py"  # 32 small layers


@pytest.fixture(scope="module")
def bundle(gates_env: Path, tmp_path_factory: pytest.TempPathFactory) -> ReferenceBundle:
    return reference(tmp_path_factory)


@pytest.fixture
def setup(bundle: ReferenceBundle) -> RoundSetup:
    return round_setup(bundle, SETTINGS)


@pytest.fixture(params=LAUNCHES)
def launch(request: pytest.FixtureRequest) -> Iterator[str]:
    with launching(request) as how:
        yield how


# says synced before its calls, then works on (a sleep stands for late work): everything
# after ``synced`` is its "record phase"
EARLY_SYNCED = """
import time
import gates.jobs.timing as _timing

_turn = _timing.CheckedLoop.turn
LATE_S = 0.025


def _early_synced(self, n, synced=None):
    if synced is not None:
        synced()
    time.sleep(LATE_S)
    return _turn(self, n)


_timing.CheckedLoop.turn = _early_synced
ModelNew = Model
"""
LATE_MS = 25.0


def _side_rows(session: TurnRound, side: str) -> list[tuple[float, float, float]]:
    """(window, record phase, taken off) in ms of each of ``side``'s turns."""
    rows = zip(session.windows_ms, session.records_ms, session.taken_off_ms, strict=True)
    return [(w, r, off) for (s, w), r, off in rows if s == side]


def test_a_candidate_that_says_synced_early_is_charged_its_late_work(
    setup: RoundSetup, tmp_path: Path, launch: str
) -> None:
    """Its whole turn follows a forged ``synced``: at most the baseline's record time comes
    off, so its late work stays charged and it reads slower (had its own record phase come
    off, only the command's round trip would be left and it would read far faster)."""
    candidate = write_candidate(tmp_path, EARLY_SYNCED)
    session = run_session(setup, candidate, tmp_path / "session")
    assert statistics.median(session.ratios) < 0.75, session.ratios
    baseline_records = [r for _, r, _ in _side_rows(session, "baseline")]
    for _, record, off in _side_rows(session, "candidate"):
        assert off <= max(baseline_records)  # never more than the baseline's own
        assert record >= LATE_MS  # its late work was in its "record phase"
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
    session = run_session(setup, identity, tmp_path / "s", pairs=8, base=base)
    assert 0.67 < statistics.median(session.ratios) < 1.5, session.ratios
    for (side, per_call), (_, window), off in zip(
        session.turns, session.windows_ms, session.taken_off_ms, strict=True
    ):
        assert 0 < off < window, side  # charged less than its raw window, never nothing
        assert per_call * session.calls == pytest.approx(window - off)
    # the baseline's own record phases are what may come off: its median, at most
    records = [r for _, r, _ in _side_rows(session, "baseline")]
    assert max(off for _, _, off in _side_rows(session, "candidate")) <= max(records)
