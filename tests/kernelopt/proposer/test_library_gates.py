"""Library candidates through the real gates on the CPU: gates 1-3 pass (gate 3 in float64),
and the timer kit's backend-switch check (gate 4) sees no tampering in the scoped cuDNN
benchmark choice, while the same switch left on by a candidate's forward is named."""

from __future__ import annotations

from pathlib import Path

from gates.cascade import check_candidate, time_candidate
from gates.reference import prepare_reference
from kernelopt.contracts.verdicts import GateName
from kernelopt.proposer.library import candidate_source
from tests.kernelopt.proposer.test_library import CONV, MLP
from tests.support.adversarial import cpu_suite_settings
from tests.support.marks import forked_children

pytestmark = forked_children  # how a child starts is not what these tests check

LEAKY = '''

class ModelNew(Model):
    """Control: the same switch, set in forward and never restored."""

    def forward(self, x):
        torch.backends.cudnn.benchmark = True
        return super().forward(x)
'''

SETTINGS = cpu_suite_settings()


def _checked(tmp_path: Path, bundle, name: str, text: str):
    """Gates 1-3 for ``text``; every one must pass."""
    path = tmp_path / f"{name}.py"
    path.write_text(text)
    checked = check_candidate(bundle, path, SETTINGS, tmp_path / name)
    reasons = [v.reason for v in checked.verdicts]
    assert [v.gate for v in checked.verdicts] == [
        GateName.STATIC,
        GateName.CORRECTNESS,
        GateName.MODEL,
    ], reasons
    assert all(v.passed for v in checked.verdicts), reasons
    return checked


def test_a_scoped_switch_is_not_tampering_and_a_leaked_one_is(tmp_path: Path) -> None:
    settings = SETTINGS
    problem = tmp_path / "conv.py"
    problem.write_text(CONV)
    bundle = prepare_reference(problem, settings, tmp_path / "ref")
    assert bundle.ok, bundle.outcome.describe()
    tampered = {}
    for name, text in (
        ("scoped", candidate_source(CONV, ["channels_last", "cudnn_benchmark"])),
        ("leaked", CONV + LEAKY),
    ):
        checked = _checked(tmp_path, bundle, name, text)
        perf = time_candidate(checked, bundle, settings, tmp_path / name).verdicts[-1]
        assert perf.gate == GateName.PERFORMANCE
        tampered[name] = perf.metrics.get("tampered", [])
    assert tampered["scoped"] == []
    assert "torch.backends.cudnn.benchmark" in tampered["leaked"]


def test_the_epilogue_candidate_passes_gates_1_to_3(tmp_path: Path) -> None:
    problem = tmp_path / "mlp.py"
    problem.write_text(MLP)
    bundle = prepare_reference(problem, SETTINGS, tmp_path / "ref")
    assert bundle.ok, bundle.outcome.describe()
    _checked(tmp_path, bundle, "epilogue", candidate_source(MLP, ["addmm_activation"]))
