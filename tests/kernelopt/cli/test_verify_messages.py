"""What ``verify`` and ``optimize`` say about the files they are given (issue 26, points 3, 9)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kernelopt.cli.verify import feedback_summary, render, verify_command
from kernelopt.cli.verify_progress import ProgressWatcher
from kernelopt.contracts.verdicts import CascadeResult, GateVerdict
from tests.support.cli import run_cli
from tests.support.paths import ROOT
from tests.support.temporal import env_for, make_settings

PROBLEM = ROOT / "tests" / "problems" / "gates" / "swish_bias.py"

TRACEBACK_FEEDBACK = (
    "Your candidate raised TypeError during the first call (Triton compile + launch).\n\n"
    '  File "cand.py", line 23, in forward\n    _scale[(1,)](x, y)\n'
    "TypeError: _scale() missing 1 required positional argument: 'n'"
)


def _verify_json(capsys: pytest.CaptureFixture, problem: Path, candidate: Path) -> dict:
    code = verify_command(problem, candidate, True, device="cpu")
    out = json.loads(capsys.readouterr().out)
    assert code == 2 and out["could_not_run"] is True
    return out


def test_a_directory_is_called_a_directory(tmp_path: Path, capsys) -> None:
    assert "is a directory" in _verify_json(capsys, PROBLEM, tmp_path)["reason"]
    assert "is a directory" in _verify_json(capsys, tmp_path, PROBLEM)["reason"]
    assert "no such file" in _verify_json(capsys, PROBLEM, tmp_path / "nope.py")["reason"]


def test_optimize_calls_a_directory_a_directory(tmp_path: Path) -> None:
    settings = make_settings(tmp_path / "home")
    done = run_cli(
        ["optimize", str(tmp_path), "--no-follow"],
        {**env_for(settings), "COLUMNS": "200"},
        timeout=60,
    )
    assert done.returncode == 2 and "is a directory" in done.stderr, done.stderr
    assert not (settings.server_dir / "server.pid").exists()


def test_a_candidate_without_model_new_names_both_forms(tmp_path: Path, capsys) -> None:
    cand = tmp_path / "cand.py"
    cand.write_text("import torch\n\ndef helper(x):\n    return x\n")
    reason = _verify_json(capsys, PROBLEM, cand)["reason"]
    assert "ModelNew" in reason and "launch(" in reason, reason
    assert "import-time" not in reason and "syntax" not in reason, reason
    cand.write_text("def launch(x):\n    return x\n")  # the other valid form passes the check
    cand_syntax = tmp_path / "broken.py"
    cand_syntax.write_text("class ModelNew(:\n")
    assert "syntax error at line 1" in _verify_json(capsys, PROBLEM, cand_syntax)["reason"]


def test_rejection_prints_one_line_of_feedback_unless_verbose(capsys) -> None:
    verdict = GateVerdict(
        gate="static", status="error", reason="TypeError", feedback=TRACEBACK_FEEDBACK
    )
    result = CascadeResult(problem="p.py", candidate="c.py", verdicts=[verdict], accepted=False)
    render(result)
    short = capsys.readouterr().out
    assert "raised TypeError during the first call" in short
    assert 'File "cand.py"' not in short and "-v, or --json" in short
    render(result, verbose=True)
    assert 'File "cand.py"' in capsys.readouterr().out
    assert feedback_summary(TRACEBACK_FEEDBACK).count("\n") == 0


def test_progress_marks_become_lines(tmp_path: Path) -> None:
    from rich.console import Console

    console = Console(file=open(tmp_path / "out.txt", "w"), width=200)  # noqa: SIM115
    child = tmp_path / "candidate-x-0123" / "child"
    child.mkdir(parents=True)
    marks = child / "progress.jsonl"
    watcher = ProgressWatcher(tmp_path, console)
    marks.write_text(
        '{"phase": "import", "t": 1}\n{"phase": "call", "t": 2, "set": "seed1"}\n{"pha'
    )
    lines = watcher.poll()
    assert [line.split("] ", 1)[1] for line in lines] == [
        "candidate: import",
        "candidate: call seed1",
    ]
    with marks.open("a") as handle:  # the half-written line completes
        handle.write('se": "done", "t": 3}\n')
    assert [line.split("] ", 1)[1] for line in watcher.poll()] == ["candidate: done"]
    assert watcher.poll() == []


def test_cpu_verify_shows_progress_and_no_traceback(tmp_path: Path) -> None:
    """The real cascade on the CPU (small sizes): progress on stderr, a short rejection."""
    env = {
        **env_for(make_settings(tmp_path / "home")),
        "KERNELOPT_GATES_SMALL": "1",
        "COLUMNS": "80",
    }
    done = run_cli(
        [
            "verify",
            str(PROBLEM),
            "--candidate",
            str(ROOT / "tests" / "fixtures" / "candidates" / "gates" / "raises.py"),
            "--device",
            "cpu",
        ],
        env,
        timeout=300,
    )
    assert done.returncode == 1, done.stdout + done.stderr
    assert "reference: build_model" in done.stderr and "candidate: dry_run seed0" in done.stderr
    assert "REJECTED at static" in done.stdout
    assert "Traceback" not in done.stdout and '  File "' not in done.stdout, done.stdout
    assert "…" not in done.stdout  # nothing cut at 80 columns
