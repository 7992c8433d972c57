"""Gate 3 inside the search: a float64 failure goes back to the executor for a fix.

The workflow, the LLM activities (over the scripted OpenAI-compatible HTTP
server) and ``gate_candidate`` itself are real: the GPU queue's gate activity
runs ``gates.campaign.gate_candidate`` on the CPU (Triton interpreter, small
sizes), with the input the workflow scheduled.  The executor's first module
rounds its sigmoid to fp16 (passes gate 2, fails gate 3); the retry-fix,
shown the gate-3 feedback, answers the honest kernel.
"""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

import pytest

from gates import campaign
from gates.runner import fast_launch
from kernelopt.contracts.compiled import (
    SearchMode,
    SearchTarget,
    SegmentResult,
    TargetKind,
)
from kernelopt.contracts.problem import ProblemSpec
from kernelopt.contracts.search import ProposerConfig, SearchKernelInput, SearchParams
from kernelopt.contracts.verdicts import (
    CandidateGateInput,
    CandidateGateResult,
    GateName,
    GateSettings,
)
from kernelopt.store import ArtifactStore, open_store
from tests.support.compiled import stub_compiled
from tests.support.scripted_openai import Reply, ScriptedOpenAI, executor, planner, summarizer
from tests.workflows.test_search_kernel import Gpu, run_search

TESTS = Path(__file__).resolve().parents[1]


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """A private home and the gates' small CPU sizes, with a CPU zygote for the gate children."""
    monkeypatch.setenv("KERNELOPT_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("KERNELOPT_GATES_SMALL", "1")
    with fast_launch("cpu"):
        yield open_store(tmp_path / "home" / "artifacts")


class RealGates(Gpu):
    """``gate_candidate`` is the library entry point itself, on the CPU (no per-kernel timing)."""

    async def gate(self, inp: CandidateGateInput) -> CandidateGateResult:
        cpu = inp.model_copy(update={"measure_kernel_speedup": False})
        return await asyncio.to_thread(campaign.gate_candidate, cpu, open_store())


def _search_input(store: ArtifactStore, queue: str, proposer: ProposerConfig) -> SearchKernelInput:
    problem = store.put_text(
        (TESTS / "problems" / "gates" / "swish_bias.py").read_text(), name="p.py"
    )
    compiled = stub_compiled(ProblemSpec(name="swish_bias", source=problem), problem, ms=1.0)
    target = SearchTarget(id="forward", kind=TargetKind.FORWARD, source=problem)
    segment = SegmentResult(
        kernels=[], library_calls=[], mode=SearchMode.SINGLE, mode_reason="", targets=[target]
    )
    return SearchKernelInput(
        campaign_id="camp",
        compiled=compiled,
        segment=segment,
        target=target,
        gpu_queue=f"{queue}-gpu",
        cpu_queue=f"{queue}-cpu",
        params=SearchParams(iterations=1, plans=1, retries=1, beam=1),
        proposer=proposer,
        use_llm=True,
        gates=GateSettings(device="cpu"),
        gate_timeout_s=120,
    )


def _module(name: str) -> str:
    return (
        f"```python\n{(TESTS / 'fixtures' / 'candidates' / 'gates' / f'{name}.py').read_text()}```"
    )


async def test_a_gate_3_failure_is_fixed_in_the_same_conversation(env, home):
    gpu = RealGates()
    with ScriptedOpenAI() as llm:
        llm.add(
            planner(1, ("half-precision gate", "fp16 sigmoid")),
            # retry-fix first: its request also holds the executor's prompt
            Reply(match="against float64", content=_module("swish_fused")),
            executor("half-precision gate", content=_module("swish_half_sigmoid")),
            summarizer(),
        )
        proposer = ProposerConfig(base_url=llm.base_url, model="m", api_key_env="NO_KEY_HERE")
        inp = _search_input(home, f"gate3-{uuid.uuid4().hex[:6]}", proposer)
        result, _ = await run_search(env, inp, gpu)
        requests = list(llm.requests)
        unused = llm.unused()

    assert unused == []
    # the search asked for gate 3 on each candidate (untimed on the CPU: no re-timing)
    asked = {i.candidate_id: i.model_gate for i in gpu.gate_inputs}
    assert asked == {"forward:i0-s0-p0-a0": True, "forward:i0-s0-p0-a1": True}
    by_id = {d.candidate.id: d for d in result.decisions if not d.retime}
    first, fixed = by_id["forward:i0-s0-p0-a0"], by_id["forward:i0-s0-p0-a1"]
    assert (first.accepted, first.deciding_gate) == (False, "model")
    assert [v.gate for v in first.verdicts] == [
        GateName.STATIC,
        GateName.CORRECTNESS,
        GateName.MODEL,
    ]
    assert first.verdicts[1].passed and not first.verdicts[2].passed
    assert fixed.accepted and fixed.reason.startswith("passed gates 1-3")
    assert fixed.verdicts[-1].gate == GateName.MODEL and fixed.verdicts[-1].passed
    assert result.candidates_accepted == 1 and result.candidates_tried == 2
    # the retry-fix was shown gate 3's verdict, its failing sets merged into one line
    (retry,) = [r for r in requests if len(r.messages) > 3]
    text = retry.messages[-1]["content"]
    assert "Gate `model` said fail" in text and "systematic error" in text
    bullets = [line for line in text.splitlines() if line.startswith("- call")]
    assert len(bullets) == 1 and bullets[0].startswith("- calls ")
    assert "hard-coding" not in text
    assert [e.role for e in result.ledger].count("retry_fix") == 1
