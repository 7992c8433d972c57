"""A memo of inputs is caught by its first-sight calls: end to end on the CPU.

The timing rotation gives a few sets over and over, so a candidate that remembers each
answer under a few sampled input values (``value_memo``) returns right answers at the cost
of a copy, and every timed check passes.  What gives it away is its calls on sealed
sets, each timed once on values new to the process: there it must do the work.  Those
sets reach the process only after its samples (``gates.first_sight``), so a memo that
reads every set it can find first, in memory or on disk, is caught the same way.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gates.cascade import verify_candidate
from kernelopt.contracts.verdicts import GateSettings, GateStatus
from tests.support.adversarial import CANDIDATES
from tests.support.candidate_sources import product_problem

# a product the CPU takes milliseconds for: a memo's copy is far cheaper (18x in one run)
PROBLEM = product_problem(1536, 1536, 1536)


def _verdict(tmp_path: Path, candidate: Path) -> object:
    problem = tmp_path / "matmul_1536.py"
    problem.write_text(PROBLEM)
    settings = GateSettings(
        device="cpu", baseline_mode="eager", warmup_ms=2.0, rep_ms=20.0, max_rounds=1
    )
    result = verify_candidate(problem, candidate, settings, workdir=tmp_path / "w")
    return result.verdicts[-1]


@pytest.mark.parametrize(
    "memo",
    [
        "value_memo",  # learns each set at its first call on it
        "prefetch_memo",  # answers every set its process holds at its first call (gc walk)
        "files_memo",  # answers every set its job's input files hold, at import
    ],
)
def test_a_memo_passes_every_check_but_not_its_first_sight_calls(
    tmp_path: Path, cpu_launcher: bool, memo: str
) -> None:
    v = _verdict(tmp_path, CANDIDATES / f"{memo}.py")
    seen = (v.reason, v.metrics.get("first_sight"))
    assert v.gate.value == "performance" and v.status == GateStatus.FAIL, seen
    assert v.reason.startswith("memoised: its calls on input values new to the process")
    assert min(v.metrics["first_sight"]["candidate"]) > 1.5, v.metrics["first_sight"]


def test_honest_code_takes_as_long_on_new_values(tmp_path: Path, cpu_launcher: bool) -> None:
    identity = tmp_path / "identity.py"
    identity.write_text(PROBLEM + "\nModelNew = Model\n")
    v = _verdict(tmp_path, identity)
    assert v.status == GateStatus.PASS, v.reason
    assert "no speed verdict on the CPU" in v.reason
