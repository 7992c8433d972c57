"""Every command's output at 80 columns: nothing cut ("compil…"), no word broken (issue 26, 8).

The check is the reader's: every word of every value the command prints appears
whole in what an 80-column terminal shows, and no line is wider than 80.
"""

from __future__ import annotations

import io
import re

import pytest
from rich.console import Console

from kernelopt.audit.render import print_report, shown_candidates
from kernelopt.cli.campaign_commands import campaign_table, print_outcome
from kernelopt.cli.output import console as cli_console
from kernelopt.cli.triage import render as render_triage
from kernelopt.cli.verify import render as render_verify
from kernelopt.compile.triage import headroom_rule
from kernelopt.contracts.compiled import (
    CompileResult,
    SegmentResult,
    TargetHeadroom,
    TriageResult,
)
from kernelopt.contracts.data_movement import headroom_reason
from kernelopt.contracts.verdicts import CascadeResult, GateVerdict
from tests.kernelopt.audit.test_collect import SCENARIOS, audit
from tests.support.wrappers import fixture_json

WIDTH = 80


def words(text: str) -> set[str]:
    return set(re.findall(r"[\w.:/@%()'-]+", text))


def assert_reads_well(shown: str, *values: str) -> None:
    assert "…" not in shown, shown
    assert all(len(line) <= WIDTH for line in shown.splitlines()), shown
    missing = set().union(*(words(v) for v in values)) - words(shown)
    assert not missing, f"cut or broken at {WIDTH} columns: {sorted(missing)}\n{shown}"


def capture(monkeypatch: pytest.MonkeyPatch, *modules) -> io.StringIO:
    """Point each module's Console() at one 80-column buffer."""
    out = io.StringIO()

    def narrow(*args, **kwargs) -> Console:
        return Console(file=out, width=WIDTH, color_system=None)

    for module in modules:
        monkeypatch.setattr(module, "Console", narrow, raising=False)
    return out


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_audit(scenario: str) -> None:
    report = audit(scenario)
    console = Console(file=io.StringIO(), width=WIDTH, record=True)
    print_report(report, console)
    shown = console.export_text()
    rows, _ = shown_candidates(report.candidates)  # a long campaign's rest is counted
    values = [c.id for c in rows] + [c.final_reason for c in rows]
    values += [c.name for c in report.checks]
    assert_reads_well(shown, *values)


def test_outcome_and_list(monkeypatch: pytest.MonkeyPatch) -> None:
    outcome = audit("llm").outcome
    console = Console(file=io.StringIO(), width=WIDTH, record=True)
    monkeypatch.setattr("kernelopt.cli.output.console", console)
    print_outcome(outcome, False)
    rows = [
        ["001_relu_chain-1a2b3c4d", "running", "2026-12-01 10:54", "compiling", "-", "-"],
        [
            "level2_004_conv_affine_relu-9f8e7d6c",
            "completed",
            "2026-11-30 08:01",
            "done",
            "synthesis_failure",
            "1.000x",
        ],
    ]
    console.print(campaign_table(rows, WIDTH))
    shown = console.export_text()
    # columns may go at 80 (phase, start, best); what is shown is whole
    assert_reads_well(shown, outcome.reason, outcome.proposer, *(" ".join(r[:2]) for r in rows))
    assert "synthesis_failure" in shown and cli_console is not console


def test_triage(monkeypatch: pytest.MonkeyPatch) -> None:
    import rich.console

    name = "level2_001_gemm_bias_relu"
    recorded = TriageResult.model_validate(fixture_json(name, "triage"))
    # a target short of bandwidth headroom, with its reason and the rule in words
    room = TargetHeadroom(
        target=recorded.targets[0].id,
        headroom=1.11,
        required=1.196,
        short=True,
        reason=headroom_reason(1.11, 1.196, recorded.gamma),
    )
    tri = recorded.model_copy(
        update={"headroom": [room], "headroom_rule": headroom_rule(4814.0, [room])}
    )
    out = capture(monkeypatch, rich.console)
    render_triage(
        CompileResult.model_validate(fixture_json(name, "compile")),
        SegmentResult.model_validate(fixture_json(name, "segment")),
        tri,
    )
    short_names = [k.name for k in tri.per_kernel if len(k.name) < 40]  # longer ones fold
    assert short_names
    assert_reads_well(
        out.getvalue(), tri.verdict_reason, *short_names, room.reason, tri.headroom_rule
    )


def test_verify(monkeypatch: pytest.MonkeyPatch) -> None:
    import rich.console

    verdicts = [
        GateVerdict(
            gate="static", status="pass", reason="dry run ok", metrics={"dry_run_seconds": 1.2}
        ),
        GateVerdict(
            gate="correctness",
            status="fail",
            reason="max abs error 3.1e-2 > tolerance at seed 1 (held-out shape 37x129)",
            metrics={"calls": [1, 2, 3], "max_abs_err": 0.031, "max_scale_err": 0.5},
        ),
    ]
    result = CascadeResult(
        problem="/work/problems/triton/001_add_relu.py",
        candidate="/work/candidates/add_relu_blocked.py",
        verdicts=verdicts,
        accepted=False,
        reason=verdicts[1].reason,
        environment={"device": "cpu", "torch": "2.13.0+cpu", "triton": "3.9.0"},
    )
    out = capture(monkeypatch, rich.console)
    render_verify(result)
    assert_reads_well(out.getvalue(), verdicts[1].reason, "3 calls, max err 0.031, rel 0.5")
