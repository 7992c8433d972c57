"""Gates 3-4 on a whole-forward win in the form it is handed back: the ``ModelNew`` itself.

The real CPU compile, a real regeneration (Inductor's C++ backend) as the candidate and the
real gate children; the campaign sends this form for a single whole-forward replacement
over an Inductor baseline (``workflows.optimize_model._as_own_model``).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gates.campaign import gate_model
from kernelopt.campaigns import prepare_problem
from kernelopt.contracts import CompileInput, ModelGateInput
from kernelopt.contracts.verdicts import GateName, GateSettings
from kernelopt.kinds.registry import compile_on
from kernelopt.proposer.regen.candidate import regenerated_candidate
from kernelopt.store import open_store

PROBLEM = '''"""Scaled rows through a ReLU, with a held-out batch size."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, d: int) -> None:
        super().__init__()
        self.scale = nn.Parameter(torch.randn(d))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x * self.scale) + 0.5


def get_init_inputs():
    return [32]


def get_inputs():
    return [torch.randn(8, 32)]


def get_holdout_inputs():
    return [[torch.randn(3, 32)]]
'''


@pytest.fixture(scope="module")
def compiled(tmp_path_factory: pytest.TempPathFactory, gates_env: Path):
    root = tmp_path_factory.mktemp("forward-model")
    path = root / "scaled_relu.py"
    path.write_text(PROBLEM)
    store = open_store(root / "artifacts")
    spec = prepare_problem(path, store)
    result = compile_on(
        CompileInput(problem=spec, measure_default_mode=False), store, "cpu", lambda fn: 1.0
    )
    return store, result


def _gate(store, compiled, text: str, **settings):
    ref = store.put_text(text, "text/x-python", "candidate.py")
    inp = ModelGateInput(
        compiled=compiled,
        wrapper=ref,
        source_kind="forward",
        settings=GateSettings(device="cpu", **settings),
    )
    return gate_model(inp, store)


def test_a_regenerated_model_new_is_checked_on_held_out_shapes_and_timed(
    compiled, cpu_launcher: bool
) -> None:
    store, result = compiled
    text = regenerated_candidate(PROBLEM, 0, "cpu", {}, {})
    gated = _gate(store, result, text, warmup_ms=1.0, rep_ms=2.0, min_rounds=1, max_rounds=1)
    reasons = [(v.gate.value, v.status.value, v.reason[:300]) for v in gated.verdicts]
    assert [v.gate for v in gated.verdicts] == [GateName.MODEL, GateName.PERFORMANCE], reasons
    assert gated.verdicts[0].passed, reasons
    assert gated.baseline_ms is not None and gated.candidate_ms is not None
    assert "gates_1_3.child" in gated.stage_seconds
    assert "candidate.import" in gated.stage_seconds  # timed as the ModelNew itself


def test_a_model_new_right_only_on_the_compiled_shape_fails_gate_3(
    compiled, cpu_launcher: bool
) -> None:
    store, result = compiled
    wrong = PROBLEM + (
        "\n\nclass ModelNew(Model):\n"
        "    def forward(self, x):\n"
        "        out = super().forward(x)\n"
        "        return out if x.shape[0] == 8 else out * 1.5\n"
    )
    gated = _gate(store, result, wrong, run_perf=False)
    verdict = gated.verdict
    assert not verdict.passed and verdict.gate == GateName.MODEL, verdict.reason
    assert "holdout" in verdict.reason, verdict.reason
