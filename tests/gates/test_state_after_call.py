"""The state a stateful forward leaves is checked after every gate-2 call.

Every call starts from the state as built (``gates.call_policy``), so a candidate that
never advances its running statistics, counter or average returns the reference's output
on each of them; only the state it leaves tells them apart.  The cheats come from a red
team (``tests/fixtures/candidates/gates``): each was accepted by all four gates before.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gates.campaign import gate_model
from gates.cascade import verify_candidate
from gates.reference_cache import _set_name
from gates.runner import forking_from
from gates.zygote import Zygote
from kernelopt.campaigns import prepare_problem
from kernelopt.contracts import CompileInput, ModelGateInput
from kernelopt.contracts.verdicts import CascadeResult, GateSettings
from kernelopt.kinds.registry import compile_on
from kernelopt.store import open_store
from tests.support.marks import slow

TESTS = Path(__file__).resolve().parents[1]
IDENTITY = TESTS / "problems" / "identity"
CHEATS = TESTS / "fixtures" / "candidates" / "gates"

RENAMED = '''
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    """The EMA under another name: its update cannot be checked, so it is refused."""

    def __init__(self, d: int) -> None:
        super().__init__()
        self.register_buffer("mean_ema", torch.zeros(d))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.mean_ema.mul_(0.9).add_(0.1 * x.mean(dim=0))
        return x - self.mean_ema
'''


def _verify(problem: str, candidate: Path, work: Path) -> CascadeResult:
    settings = GateSettings(device="cpu", run_perf=False, static_timeout_s=120.0)
    return verify_candidate(IDENTITY / f"{problem}.py", candidate, settings, workdir=work)


def _state_problems(result: CascadeResult) -> list[str]:
    return [c["state_problem"] for c in result.verdicts[1].metrics["calls"] if "state_problem" in c]


@pytest.mark.parametrize(
    ("problem", "cheat", "names"),
    [
        ("ema_buffer", "ema_frozen", "avg"),
        ("call_counter_buffer", "counter_frozen", "calls"),
        ("batchnorm1d_train", "bn_stats_skipped", "bn.running_mean"),
        ("rebound_buffer_average", "rebound_average_frozen", "avg"),
    ],
)
def test_a_forward_that_never_advances_its_state_is_rejected_at_correctness(
    cpu_zygote: Zygote | None, tmp_path: Path, problem: str, cheat: str, names: str
) -> None:
    with forking_from("cpu", cpu_zygote):
        result = _verify(problem, CHEATS / f"{cheat}.py", tmp_path)
    assert not result.accepted
    assert [v.gate.value for v in result.verdicts] == ["static", "correctness"]
    found = _state_problems(result)
    assert found and all(names in text and "came out otherwise" in text for text in found)
    assert "update it as the reference does" in result.feedback


def test_the_identity_of_a_stateful_forward_passes_with_its_state_compared(
    cpu_zygote: Zygote | None, tmp_path: Path
) -> None:
    problem = IDENTITY / "ema_buffer.py"
    candidate = tmp_path / "identity.py"
    candidate.write_text(problem.read_text() + "\n\nModelNew = Model\n")
    with forking_from("cpu", cpu_zygote):
        result = _verify("ema_buffer", candidate, tmp_path / "work")
    assert result.accepted, result.feedback
    assert result.environment["policy"]["stateful"] == ["avg"]
    assert not _state_problems(result)


def test_state_kept_under_another_name_is_refused_with_the_name_to_keep(
    cpu_zygote: Zygote | None, tmp_path: Path
) -> None:
    candidate = tmp_path / "renamed.py"
    candidate.write_text(RENAMED)
    with forking_from("cpu", cpu_zygote):
        result = _verify("ema_buffer", candidate, tmp_path / "work")
    assert not result.accepted
    assert any("the candidate has no avg" in text for text in _state_problems(result))


@pytest.mark.parametrize(
    "problem",
    [
        # one problem per layout in the default run (a buffer aliased by the wrapper, state
        # stored as extra outputs, a number read from an output); the rest are slow (10-45 s
        # each on the CPU) and their layouts have unit tests in
        # tests/kernelopt/compile/test_forward_wrapper_layout.py
        "ema_buffer",
        "call_counter_buffer",
        "python_float_output",
        "constants_in_output",
        *slow(
            "batchnorm1d_train",
            "spectral_norm_train",
            "rebound_buffer_average",
            "returns_state_buffer",
            "same_tensor_twice_output",
            "none_in_output_tuple",
        ),
    ],
)
def test_the_compilers_own_wrapper_starts_from_the_built_state_and_passes_with_its_state(
    cpu_zygote: Zygote | None,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    problem: str,
) -> None:
    """A campaign gates Inductor's wrapper, whose buffers are captured arguments, as built:
    the gates restore them before every call and compare them after it (before, the EMA's
    wrapper failed gate 2 on its own baseline).  State the forward stores on its
    module comes back as extra wrapper outputs, dropped and written back into the entries
    (before, the counter's and the spectral norm's wrappers returned too many outputs); a
    returned buffer never enters the graph and a tensor returned twice is one output (before,
    too few); a None result, a Python number read from an output and constants the graph
    never returns (a string, a dtype, a shape) are picked too."""
    monkeypatch.setenv("KERNELOPT_HOME", str(tmp_path))
    store = open_store(tmp_path / "artifacts")
    spec = prepare_problem(IDENTITY / f"{problem}.py", store)
    compiled = compile_on(
        CompileInput(problem=spec, measure_default_mode=False), store, "cpu", lambda fn: 1.0
    )
    settings = GateSettings(device="cpu", run_perf=False)
    with forking_from("cpu", cpu_zygote):
        gated = gate_model(
            ModelGateInput(compiled=compiled, wrapper=compiled.wrapper, settings=settings), store
        )
    verdicts = [(v.gate.value, v.status.value, v.reason[:300]) for v in gated.verdicts]
    assert [v.passed for v in gated.verdicts] == [True] * len(gated.verdicts), verdicts
    assert gated.verdicts[0].gate.value == "model", verdicts


def test_a_kept_bundles_state_files_belong_to_their_set() -> None:
    assert _set_name("seed0.state_after.pt") == "seed0"
    assert _set_name("heldout.pt") == "heldout"
    assert _set_name("seed0.ties.fp64.pt") == "seed0"  # the index outputs' near-ties
