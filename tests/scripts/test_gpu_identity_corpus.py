"""scripts/gpu_identity_corpus.py: verify's count and exit, and ``summary``, on the CPU.

The four gates are doubled (``gates.cascade.verify_candidate``), so these check only what
the script makes of their answers: a problem the deadline left out is neither accepted nor
rejected, it still gets its row, and it makes the exit non-zero.
"""

from __future__ import annotations

import contextlib
import json
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from scripts import gpu_identity_corpus as corpus

THREE = [path.stem for path in corpus.CORPUS[:3]]


def _gates(monkeypatch: pytest.MonkeyPatch, accepted: bool, seconds: float) -> None:
    """Gates that take ``seconds`` and accept (or reject) every candidate, on no device."""

    def verify_candidate(*args: Any, **kwargs: Any) -> SimpleNamespace:
        time.sleep(seconds)
        return SimpleNamespace(
            accepted=accepted,
            category=None,
            speedup=None,
            reason="" if accepted else "slower than eager",
            environment={},
            verdicts=[],
        )

    monkeypatch.setattr("gates.cascade.verify_candidate", verify_candidate)
    monkeypatch.setattr("gates.runner.fast_launch", lambda device: contextlib.nullcontext())


def _rows(out: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (out / "identity.jsonl").read_text().splitlines()]


def test_problems_the_deadline_left_out_are_not_counted_as_accepted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # the first problem runs (0.2 s, rejected), the deadline has passed for the other two
    _gates(monkeypatch, accepted=False, seconds=0.2)
    code = corpus.verify(deadline=0.1, out=tmp_path, only=THREE)
    assert code == 1
    assert capsys.readouterr().out.splitlines()[-1] == (
        "0 of 1 run accepted; 2 not reached (deadline)"
    )
    rows = _rows(tmp_path)
    assert [row["problem"] for row in rows] == THREE  # the file names every problem asked for
    assert rows[0]["accepted"] is False
    assert [row.get("skipped") for row in rows[1:]] == ["deadline", "deadline"]


@pytest.mark.parametrize(
    ("deadline", "code", "last"),
    [
        # a run cut by the deadline fails though all that ran were accepted
        (0.1, 1, "1 of 1 run accepted; 2 not reached (deadline)"),
        (60.0, 0, "3 of 3 run accepted; 0 not reached (deadline)"),
    ],
)
def test_only_a_run_where_every_problem_ran_and_was_accepted_passes(
    deadline: float,
    code: int,
    last: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    _gates(monkeypatch, accepted=True, seconds=0.2 if deadline < 1 else 0.0)
    assert corpus.verify(deadline=deadline, out=tmp_path, only=THREE) == code
    assert capsys.readouterr().out.splitlines()[-1] == last
    if code == 0:
        assert [row["accepted"] for row in _rows(tmp_path)] == [True] * 3


def test_summary_counts_skipped_rows_apart_and_takes_a_problems_last_row(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a, b, c = THREE
    rows = [
        {"problem": a, "accepted": True},
        {"problem": b, "skipped": "deadline"},
        {"problem": c, "skipped": "deadline"},
        {"problem": c, "accepted": True},  # a later call ran what the deadline skipped
    ]
    (tmp_path / "identity.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert corpus.summary(tmp_path) == 1
    assert capsys.readouterr().out.splitlines() == ["2 of 2 run accepted; 1 not reached (deadline)"]


def test_summary_fails_while_a_campaign_is_unfinished(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    table = [["c1", "matched", "1.000x", "", "", ""], ["c2", "unfinished", "search", "", "", ""]]
    (tmp_path / "table.json").write_text(json.dumps(table))
    assert corpus.summary(tmp_path) == 1
    assert capsys.readouterr().out.splitlines()[-1] == (
        "1 of 2 reached an outcome; errors: none; unfinished (resume them): ['c2']"
    )
    table[1][1] = "fallback"
    (tmp_path / "table.json").write_text(json.dumps(table))
    assert corpus.summary(tmp_path) == 0


def test_the_verdict_levers_reach_the_gates_and_every_row(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The corpus doubles as the levers' check that identical code reads identical, so the
    settings the gates ran with are the ones asked for, and each row says which."""
    seen: list[Any] = []

    def verify_candidate(path: Path, candidate: Path, settings: Any, **_: Any) -> SimpleNamespace:
        seen.append(settings)
        return SimpleNamespace(
            accepted=True, category=None, speedup=None, reason="", environment={}, verdicts=[]
        )

    monkeypatch.setattr("gates.cascade.verify_candidate", verify_candidate)
    monkeypatch.setattr("gates.runner.fast_launch", lambda device: contextlib.nullcontext())
    levers = {"settle_step_wall_ms": 50.0, "prestart_timing": True}
    assert corpus.verify(deadline=60.0, out=tmp_path, only=THREE[:1], levers=levers) == 0
    assert seen[0].settle_step_wall_ms == 50.0 and seen[0].prestart_timing
    assert seen[0].baseline_mode == "eager"
    assert _rows(tmp_path)[0]["levers"] == levers


def test_only_runs_the_problems_in_the_order_asked() -> None:
    """A deadline cuts the last problems, so the ones asked for first run first."""
    asked = [THREE[2], THREE[0], THREE[2]]
    assert [p.stem for p in corpus.chosen(asked)] == [THREE[2], THREE[0]]
    assert corpus.chosen(None) == corpus.CORPUS


def test_ab_runs_each_problem_with_and_without_the_levers_in_turn(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Back to back, the levers first for every other problem; both rows kept by summary."""
    seen: list[tuple[str, bool]] = []

    def verify_candidate(path: Path, candidate: Path, settings: Any, **_: Any) -> SimpleNamespace:
        seen.append((path.stem, settings.prestart_timing))
        return SimpleNamespace(
            accepted=True, category=None, speedup=None, reason="", environment={}, verdicts=[]
        )

    monkeypatch.setattr("gates.cascade.verify_candidate", verify_candidate)
    monkeypatch.setattr("gates.runner.fast_launch", lambda device: contextlib.nullcontext())
    levers = {"prestart_timing": True}
    assert corpus.verify(60.0, tmp_path, only=THREE[:2], levers=levers, ab=True) == 0
    first, second = THREE[:2]
    assert seen == [(first, True), (first, False), (second, False), (second, True)]
    rows = corpus.identity_rows(tmp_path / "identity.jsonl")
    assert sorted((r["problem"], bool(r["levers"])) for r in rows) == sorted(seen)


def test_owed_problems_are_those_without_a_committed_outcome(tmp_path: Path) -> None:
    """An outcome file ``<problem>-<id>.outcome.json`` anywhere under the results marks its
    problem done (problem names hold underscores, ids none); the rest stay owed, in order."""
    first, second, third = THREE
    (tmp_path / "a" / "campaigns").mkdir(parents=True)
    (tmp_path / "a" / "campaigns" / f"{second}-1a2b3c4d.outcome.json").write_text("{}")
    (tmp_path / "a" / "campaigns" / f"{first}-9f8e7d6c.report.md").write_text("")
    owed = [p.stem for p in corpus.owed_problems(tmp_path)]
    assert owed[:2] == [first, third]
    assert second not in owed
    assert len(owed) == len(corpus.CORPUS) - 1


def test_unverified_problems_are_those_no_committed_row_accepted(tmp_path: Path) -> None:
    """A problem counts as verified on the GPU once any committed identity row accepted
    it; a refused row or one the deadline skipped leaves it owed."""
    first, second, third = THREE
    (tmp_path / "s1").mkdir()
    (tmp_path / "s1" / "identity.jsonl").write_text(
        "\n".join(
            json.dumps(row)
            for row in (
                {"problem": first, "accepted": False},
                {"problem": second, "accepted": True},
                {"problem": third},
            )
        )
    )
    owed = [p.stem for p in corpus.unverified_problems(tmp_path)]
    assert second not in owed and first in owed and third in owed
    assert len(owed) == len(corpus.CORPUS) - 1
