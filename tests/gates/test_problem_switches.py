"""Backend switches a problem file sets at import are the problem's, not a candidate's.

A campaign's baseline is Inductor's wrapper, which never imports the problem file, while a
built-in candidate is the problem file plus ``ModelNew``: its import set the problem's
switches again and gate 4 named them as tampering (on the H100, every candidate of
``backend_flags_at_import``).  The reference child records what the problem's import sets
(``EvaluationPolicy.problem_switches``) and a timing child excuses exactly those values.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gates.cascade import check_candidate, time_candidate
from gates.reference import prepare_reference
from gates.timers import excused_switches
from kernelopt.contracts.verdicts import GateName
from tests.support.adversarial import cpu_suite_settings
from tests.support.marks import forked_children

pytestmark = forked_children  # how a child starts is not what these tests check

PROBLEM = """
import torch
import torch.nn as nn

torch.backends.cudnn.benchmark = not torch.backends.cudnn.benchmark


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(16, 16)

    def forward(self, x):
        return torch.relu(self.lin(x))


def get_inputs():
    return [torch.randn(8, 16)]


def get_init_inputs():
    return []
"""

SAME = "\n\nModelNew = Model\n"
MORE = "\n\ntorch.backends.cudnn.enabled = not torch.backends.cudnn.enabled\nModelNew = Model\n"


def test_only_the_problems_own_values_are_excused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("gates.timers.switch_values", lambda: {"a": "True", "b": "False"})
    tampered = ["a", "b", "time.perf_counter"]
    assert excused_switches(tampered, {"a": "True"}) == ["b", "time.perf_counter"]
    assert excused_switches(tampered, {"b": "True"}) == tampered  # another value: not excused
    assert excused_switches(tampered, {}) == tampered


def test_a_candidate_importing_the_problems_switches_is_not_named(tmp_path: Path) -> None:
    settings = cpu_suite_settings()
    problem = tmp_path / "flags.py"
    problem.write_text(PROBLEM)
    bundle = prepare_reference(problem, settings, tmp_path / "ref")
    assert bundle.ok, bundle.outcome.describe()
    assert bundle.policy.problem_switches == {"torch.backends.cudnn.benchmark": "True"}
    metrics = {}
    for name, text in (("same", PROBLEM + SAME), ("more", PROBLEM + MORE)):
        path = tmp_path / f"{name}.py"
        path.write_text(text)
        checked = check_candidate(bundle, path, settings, tmp_path / name)
        assert all(v.passed for v in checked.verdicts), [v.reason for v in checked.verdicts]
        perf = time_candidate(checked, bundle, settings, tmp_path / name).verdicts[-1]
        assert perf.gate == GateName.PERFORMANCE
        metrics[name] = perf.metrics
    # the baseline (the problem's own Model) shows no change either: nothing to excuse there
    assert "changed_by_baseline" not in metrics["same"]
    assert metrics["same"].get("tampered", []) == []
    assert metrics["more"]["tampered"] == ["torch.backends.cudnn.enabled"]
