"""Hostile candidates in a screen job: the gate runner contains them as in any gate job.

Screening runs a round's candidates in one ``screen`` job through ``run_job``
(spawned, and forked from the sandboxed zygote): the environment allow-list, the
filesystem view and the PID namespace or zygote sweep are the gate jobs' own.
One job screens a daemon, a key thief and a thread spinner before an honest
kernel; each hostile one costs only its own estimate, the honest one after
them is still screened, and the host side is checked as in
``test_hostile_candidates``.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from pathlib import Path

import pytest

from gates.protocol import SCREEN_RESULTS, ModelSource, ScreenEntry, ScreenJob
from gates.runner import run_job
from gates.screening import read_lines
from gates.zygote import Zygote
from kernelopt.contracts.screening import ScreenParams
from tests.security.conftest import SECRET, Bait
from tests.security.test_hostile_candidates import (
    CANDIDATES,
    LAUNCHES,
    PROBLEM,
    _files_text,
    _processes_with,
)
from tests.support.candidate_sources import SWISH_MODEL

HONEST = (
    Path(__file__).resolve().parents[1] / "fixtures" / "candidates" / "gates" / "swish_fused.py"
)
SPINNER = (
    """
import threading
import time

import torch
import torch.nn as nn


def _spin():
    while True:  # steals the CPU from every later timing in this process
        time.sleep(0.001)


threading.Thread(target=_spin, daemon=True).start()

"""
    + SWISH_MODEL
)


def _entry(tmp: Path, cid: str, source: str) -> ScreenEntry:
    path = tmp / f"cand_{cid}.py"
    path.write_text(source)
    model = ModelSource(kind="candidate", problem_path=str(PROBLEM), candidate_path=str(path))
    return ScreenEntry(candidate_id=cid, model=model)


def _hostile(name: str, bait: dict) -> str:
    source = (CANDIDATES / f"{name}.py").read_text()
    return source.replace("BAIT: dict = {}", f"BAIT: dict = {json.dumps(bait)}", 1)


@pytest.mark.parametrize("launch", LAUNCHES)
def test_a_screen_job_gets_the_gate_jobs_sandbox(
    bait: Bait, zygote: Zygote, tmp_path: Path, launch: str
) -> None:
    token = f"kernelopt-daemon-{uuid.uuid4().hex}"
    inputs = tmp_path / "inputs"
    inputs.mkdir()
    job = ScreenJob(
        device="cpu",
        seed=0,
        model_seed=0,
        inputs_dir=str(inputs),
        baseline=ModelSource(kind="eager", problem_path=str(PROBLEM)),
        candidates=[
            _entry(tmp_path, "daemon", _hostile("daemon", {"token": token})),
            _entry(tmp_path, "env_key", _hostile("env_key", {})),  # its report is the last
            _entry(tmp_path, "spinner", SPINNER),
            _entry(tmp_path, "honest", HONEST.read_text()),
        ],
        params=ScreenParams(),
    )
    work = tmp_path / "work"
    try:
        outcome = run_job(
            job,
            work,
            timeout_s=300,
            stall_s=60,
            device="cpu",
            via=zygote if launch == "forked" else None,
        )
        assert outcome.ok, outcome.describe()
        deadline = time.monotonic() + 5
        while _processes_with(token) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert _processes_with(token) == []  # the daemon died with its job
    finally:
        for pid in _processes_with(token):
            os.kill(pid, 9)
    lines = {line.candidate_id: line for line in read_lines(work / SCREEN_RESULTS)}
    assert list(lines) == ["", "daemon", "env_key", "spinner", "honest"]
    assert lines["daemon"].ok  # started its daemon, then behaved
    thief = lines["env_key"]
    assert not thief.ok and "KeyError" in thief.note and "OPENAI_API_KEY" in thief.note
    env = json.loads((work / "report.json").read_text())["env"]
    assert "OPENAI_API_KEY" not in env and "KERNELOPT_API_KEY" not in env
    assert not [k for k in env if k.startswith("KERNELOPT_TEMPORAL") or k == "KERNELOPT_HOME"]
    assert env.get("HOME") != str(bait.home)
    assert SECRET not in _files_text(work)
    # the thread it left is named, so the candidates after it are screened again
    assert lines["spinner"].ok and lines["spinner"].suspect == "left 1 thread(s) running"
    assert lines["honest"].ok and lines["honest"].ms and not lines["honest"].suspect
