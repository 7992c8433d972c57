"""The evaluation's outcome table: every candidate's own gate-4 number is shown, not only
the re-stitched models' (run 1's candidates were all correct and all slower, which the
table used to hide behind zeros)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from kernelopt.contracts.verdicts import GateName
from scripts.llm_eval.commands import build_parser, cmd_compare
from scripts.llm_eval.record import EvalCall, EvalManifest, EvalProblem, idle_without_replies
from scripts.llm_eval.report import candidate_counts, report_markdown
from scripts.llm_eval.timeline import Step, busy_union, timeline_markdown


def _candidate(speedup: float | None, *, passed_1_2: bool = True) -> SimpleNamespace:
    verdicts = [SimpleNamespace(gate=GateName.STATIC, passed=True)]
    verdicts.append(SimpleNamespace(gate=GateName.CORRECTNESS, passed=passed_1_2))
    return SimpleNamespace(
        verdicts=verdicts,
        deciding_gate="performance" if speedup else "correctness",
        passed_gates_1_2=passed_1_2,
        final="rejected",
        speedup=speedup,
        name="c",
    )


def test_the_table_shows_each_candidates_speedup_on_its_own_target() -> None:
    audit = SimpleNamespace(
        candidates=[_candidate(0.93), _candidate(0.981), _candidate(None, passed_1_2=False)],
        model_trials=[],
        checks=[],
    )
    counts = candidate_counts(audit)
    assert counts["kernel_speedups"] == [0.981, 0.93]
    assert counts["best_kernel_speedup"] == 0.981
    manifest = EvalManifest(
        created_at="now",
        rounds=2,
        options={},
        problems=[EvalProblem(path="p.py", name="p", campaign_id="p-1")],
        calls=[EvalCall(command="start", host="vm", started_at="then")],
    )
    row = {"problem": "p", "campaign_id": "p-1", "status": "running", **counts}
    text = report_markdown([row], manifest, "run")
    header = next(line for line in text.splitlines() if line.startswith("| problem"))
    cells = next(line for line in text.splitlines() if line.startswith("| p |"))
    assert header.count("|") == cells.count("|")
    assert (
        dict(zip(header.split("|"), cells.split("|"), strict=True))[" best kernel "] == " 0.981x "
    )
    assert "candidates timed on their target: 0.981x, 0.93x" in text


def test_the_timeline_counts_overlapping_gpu_steps_once_in_its_busy_span() -> None:
    assert busy_union([(0.0, 10.0), (5.0, 12.0), (20.0, 21.0), (6.0, 7.0)]) == 13.0
    assert busy_union([]) == 0.0
    found = [
        Step(100.0, 110.0, "gate_candidate", "a"),
        Step(105.0, 115.0, "gate_candidate", "b"),
        Step(115.0, 116.0, "plan", "a"),  # a CPU step: not in the GPU line
    ]
    text = timeline_markdown(found, "t")
    assert "| 5.0 | 15.0 | 10.0 | gate_candidate | b |" in text
    assert "GPU-queue activities: 2, 20.0 s held in all, 15.0 s with at least one running" in text
    assert "mean overlap 1.33" in text


def test_a_resume_without_replies_is_idle_only_when_every_campaign_waits_for_them() -> None:
    def manifest(*states: str) -> EvalManifest:
        call = EvalCall(command="resume", host="vm", started_at="then")
        call.states = {f"c{i}": s for i, s in enumerate(states)}
        return EvalManifest(created_at="now", rounds=2, options={}, calls=[call])

    asking = manifest("waiting for 2 retry_fix", "finished", "waiting for 1 plan")
    assert "no reply was given" in (idle_without_replies(asking, 0) or "")
    assert idle_without_replies(asking, 3) is None  # the replies are the work
    for busy in ("waiting for a GPU worker (screen_candidates)", "running gate_candidate"):
        assert idle_without_replies(manifest("waiting for 1 plan", busy), 0) is None
    assert idle_without_replies(manifest("finished", "finished"), 0) is None
    assert idle_without_replies(EvalManifest(created_at="now", rounds=2, options={}), 0) is None


def test_two_runs_side_by_side_sum_counts_and_take_geomeans(tmp_path: Path) -> None:
    def main(argv: list[str]) -> int:  # the command itself: main() ends the process
        return asyncio.run(cmd_compare(build_parser().parse_args(argv)))

    def report(path, rows):
        path.write_text(json.dumps({"rows": rows}))
        return path

    first = report(
        tmp_path / "r1.json",
        [
            {"problem": "a", "outcome": "fallback", "speedup": 1.0, "candidates": 4, "parsed": 2},
            {"problem": "b", "outcome": "optimized", "speedup": 4.0, "candidates": 1},
        ],
    )
    second = report(
        tmp_path / "r2.json",
        [{"problem": "a", "outcome": "optimized", "speedup": 1.21, "candidates": 6, "parsed": 6}],
    )
    out = tmp_path / "side.md"
    assert (
        main(["compare", "--run", f"run1={first}", "--run", f"run2={second}", "--out", str(out)])
        == 0
    )
    lines = out.read_text().splitlines()
    table = {}
    current = None
    for line in lines[2:]:
        if not line.startswith("|"):
            break
        problem, column, *cells = [c.strip() for c in line.strip("|").split("|")]
        current = problem or current
        table[(current, column)] = cells
    assert table[("a", "speedup")] == ["1.000x", "1.210x"]
    assert table[("b", "outcome")] == ["optimized", "-"]  # run 2 has no row for b
    assert table[("**all**", "speedup")] == ["2.000x", "1.210x"]  # geomean of 1 and 4
    assert table[("**all**", "candidates")] == ["5", "6"]
    assert table[("**all**", "outcome")] == ["1 optimized, 1 fallback", "1 optimized"]
    assert "run2 has no row for b" in out.read_text()
    with pytest.raises(SystemExit, match=r"LABEL=REPORT\.json"):
        main(["compare", "--run", str(first)])
    with pytest.raises(SystemExit, match="not an llm_eval report"):
        main(["compare", "--run", f"x={report(tmp_path / 'bad.json', [{'no': 1}])}"])
