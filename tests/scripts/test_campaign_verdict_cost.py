"""scripts/campaign_verdict_cost.py: the table's stage medians, on the H200's rows.

The fixture is the nineteenth H200 run's third call (``docs/results/h200/nineteenth/call3``,
``campaign_cost_{base,levers}.json``), its stage times cut to the table's columns: per
label two verdicts passed and four failed at gates 1-3, so only two ran the timing stages.
"""

from __future__ import annotations

import json
from typing import Any

from scripts.campaign_verdict_cost import CAPTION, STAGES, table
from tests.support.paths import ROOT

FIXTURE = ROOT / "tests" / "fixtures" / "campaign_cost" / "h200_nineteenth_call3.json"


def _cells(text: str) -> dict[str, dict[str, str]]:
    """The table's rows by label, each cell by its column's title."""
    lines = [line for line in text.splitlines() if line.startswith("|")]
    titles = [cell.strip() for cell in lines[0].strip("|").split("|")]
    rows = [[cell.strip() for cell in line.strip("|").split("|")] for line in lines[2:]]
    return {row[0]: dict(zip(titles, row, strict=True)) for row in rows}


def test_a_stage_median_counts_only_the_verdicts_that_ran_that_stage() -> None:
    rows: list[dict[str, Any]] = json.loads(FIXTURE.read_text())
    text = table(rows)
    assert text.splitlines()[0] == CAPTION
    cells = _cells(text)
    base, levers = cells["base"], cells["levers"]
    # the two passing verdicts' timing (7.974 s and 8.51 s), not 0 s of the four failing
    assert base["timing s (n)"] == "8.242 (2)"
    assert base["baseline.settle s (n)"] == "1.163 (2)"
    assert base["candidate.settle s (n)"] == "1.169 (2)"
    assert levers["timing s (n)"] == "4.553 (2)"
    assert levers["baseline.wait_go s (n)"] == "2.274 (2)"
    # a stage every verdict ran keeps its median over all six
    assert base["reference s (n)"] == "2.933 (6)"
    assert levers["gates_1_3 s (n)"] == "3.069 (6)"


def test_a_stage_no_verdict_ran_reads_a_dash_not_zero() -> None:
    cells = _cells(table(json.loads(FIXTURE.read_text())))
    assert cells["base"]["baseline.wait_go s (n)"] == "-"  # no prestarted timing in base
    for label in ("base", "levers"):
        assert cells[label]["gates_1_2 s (n)"] == "-"
        assert cells[label]["reference_draw_child s (n)"] == "-"
    assert len(cells["base"]) == 7 + len(STAGES)
