"""Through the real cascade with the sandbox on: the verdict names what was refused.

The shared input files and the problem file are read-only in the candidate's
view, so a rewrite fails in the candidate itself (a static ERROR naming the
read-only file system) and the files stay as they were; the next candidate
passes, so the campaign goes on.  (With the sandbox off, the parent-side
detection and restore in tests/gates/test_adversarial_cpu.py take over.)
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gates.cascade import run_gates_1_to_3
from gates.problem_io import digest_dir
from gates.protocol import ModelSource
from gates.reference import prepare_reference
from kernelopt.contracts.verdicts import GateSettings, GateStatus
from tests.security.conftest import Bait
from tests.support.adversarial import CANDIDATES, PROBLEMS

LAUNCHES = ["spawned", "forked"]


@pytest.mark.parametrize("launch", LAUNCHES)
def test_rewriting_the_shared_inputs_is_refused_and_the_campaign_goes_on(
    bait: Bait, tmp_path: Path, launch: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import gates.runner
    from gates.zygote import Zygote

    zygotes: dict[str, Zygote] = {}
    monkeypatch.setattr(gates.runner, "_ZYGOTES", zygotes)
    if launch == "forked":
        zygotes["cpu"] = Zygote(gates.runner.zygote_env("cpu"), start_timeout_s=120.0)
    try:
        settings = GateSettings(device="cpu", run_model_gate=False)
        problem = tmp_path / "swish_bias.py"
        problem.write_bytes((PROBLEMS / "swish_bias.py").read_bytes())
        bundle = prepare_reference(problem, settings, tmp_path / "reference")
        assert bundle.ok
        before = digest_dir(bundle.inputs_dir), problem.read_bytes()

        def check(name: str) -> list:
            source = ModelSource(
                kind="candidate", problem_path=str(problem), candidate_path=str(CANDIDATES / name)
            )
            verdicts, _ = run_gates_1_to_3(bundle, source, settings, tmp_path / name)
            return verdicts

        refused = check("tamper_inputs.py")
        assert [v.gate.value for v in refused] == ["static"]
        assert refused[0].status == GateStatus.ERROR
        assert "Read-only file system" in refused[0].reason + str(refused[0].metrics)
        assert (digest_dir(bundle.inputs_dir), problem.read_bytes()) == before
        assert all(v.passed for v in check("swish_fused.py"))
    finally:
        for zygote in zygotes.values():
            zygote.close()
