"""The scripted-LLM GPU run's script is checked on every CI run, so a device call never
starts on replies that would not parse or route (``python -m tests.e2e.llm_campaign
--check-only``: static routing checks, then one search iteration per problem through the
real agent code and the real ``openai`` client over HTTP)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.e2e import llm_campaign as script
from tests.support.paths import ROOT


def test_every_scripted_problem_routes_and_parses(tmp_path: Path) -> None:
    run = subprocess.run(
        [sys.executable, "-m", "tests.e2e.llm_campaign", "--check-only"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "OUT": str(tmp_path)},
        cwd=ROOT,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert "every rule used as planned" in run.stdout
    assert (tmp_path / "preflight.json").is_file()


def test_a_reply_marker_shared_by_two_modules_is_caught() -> None:
    problems = [script.ProblemScript.load(p) for p in script.DEFAULT_PROBLEMS]
    assert len(problems) >= 4 and script.check_script(problems) == []
    markers = dict(script.RETRY_MARKERS)
    try:  # a marker that also occurs in another module would route two requests to one reply
        script.RETRY_MARKERS[("layernorm", "wrong")] = "tl.program_id"
        errors = script.check_script(problems)
    finally:
        script.RETRY_MARKERS.clear()
        script.RETRY_MARKERS.update(markers)
    assert any("layernorm/wrong" in e for e in errors)
