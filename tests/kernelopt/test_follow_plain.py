"""Progress where there is no terminal (a log file, a pipe): plain lines, only on change."""

from __future__ import annotations

import io

from rich.console import Console

from kernelopt.contracts import CampaignPhase, CampaignProgress
from kernelopt.follow import _PlainProgress, status_line


def _progress(**kw) -> CampaignProgress:
    base = {"campaign_id": "c1", "problem": "p", "phase": CampaignPhase.SEARCHING}
    return CampaignProgress(**{**base, **kw})


def test_a_line_says_phase_targets_candidates_and_best() -> None:
    line = status_line(
        _progress(
            targets_done=1,
            targets_total=3,
            candidates_tried=12,
            candidates_accepted=4,
            best_speedup=1.25,
            current_target="k2",
        ),
        "waiting for a GPU worker",
    )
    assert line == (
        "searching; targets 1/3 done (33%), 2 left, now k2; candidates 12 gated, 4 passed "
        "gates 1-2; best 1.250x; waiting for a GPU worker"
    )
    assert status_line(None, None) == "starting"


def test_lines_are_printed_on_change_and_now_and_then() -> None:
    out = io.StringIO()
    console = Console(file=out, width=300)
    assert not console.is_terminal
    plain = _PlainProgress(console, started=0.0, every_s=3600)
    for line in ["a", "a", "a", "b", "b", "a"]:
        plain.update(line)
    printed = [ln.split("] ", 1)[1] for ln in out.getvalue().splitlines()]
    assert printed == ["a", "b", "a"]
    plain.every_s = 0.0  # a long unchanged stretch still shows signs of life
    plain.update("a")
    assert out.getvalue().splitlines()[-1].endswith("] a") and len(out.getvalue().splitlines()) == 4
