"""Issue 29 point 1-2: the rendered prompts carry every fact, from the fixtures' own data."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kernelopt.agents.budget import BUDGETS, messages_tokens
from kernelopt.agents.messages import entry_points_for
from kernelopt.agents.parsing import parse_kernel_reply
from kernelopt.cli.prompt import load, render
from kernelopt.contracts.compiled import TargetKind
from kernelopt.errors import LLMReplyError
from kernelopt.store import open_store

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "wrappers"
FORWARD = FIXTURES / "level1_009_softmax_rows.compile.json"  # single mode: one forward target
KERNEL = FIXTURES / "level3_002_transformer_block.compile.json"  # multi mode: kernel targets


def _text(messages) -> str:
    return "\n".join(m["content"] for m in messages)


def _triage(path: Path) -> dict:
    return json.loads(Path(str(path).replace(".compile.json", ".triage.json")).read_text())


@pytest.fixture
def problem(tmp_path, request):
    return load(request.param, open_store(tmp_path))


def _common_facts(text: str, facts, compiled) -> None:
    hw = facts.hardware
    assert compiled.gpu_name in text
    assert f"{hw.sm_count} SMs" in text and hw.sm_count
    assert f"{hw.bandwidth_gbs:.0f} GB/s" in text
    assert "L2 " in text and str(hw.l2_bytes) in text
    assert f"{facts.baseline_ms * 1000:.2f} us per forward" in text
    shown = "share of the timed forward" if facts.dispatched_ms else "share"
    assert f"{shown}: {facts.share:.1%}" in text
    assert "gamma = 1.03" in text and ("Amdahl" in text or "unreachable" in text)
    assert f"({facts.bytes_floor} B)" in text  # the bytes-moved floor
    for rule in ("atol 0.001", "rtol 0.001", "TF32", "No fast math", "float64", "0.0001"):
        assert rule in text
    assert "backend_hash" not in text and "triton_meta=..." in text  # metadata trimmed


@pytest.mark.parametrize("problem", [FORWARD], indirect=True)
@pytest.mark.parametrize("role", ["planner", "executor", "retry"])
def test_whole_model_prompt_has_every_fact_and_only_the_forward_form(problem, role):
    messages, target, facts = render(problem, role)
    text = _text(messages)
    assert target.kind == TargetKind.FORWARD
    _common_facts(text, facts, problem.compiled)
    triage = _triage(FORWARD)
    assert facts.baseline_ms == pytest.approx(triage["total_ms"])
    for arg in target.signature:  # the forward's inputs, shapes and dtypes
        assert (
            f"| {list(arg.tensor.shape)} | {list(arg.tensor.stride)} | {arg.tensor.dtype} |" in text
        )
    for kernel in problem.segment.kernels:  # Inductor's kernels, with their launch and grid
        assert f"`{kernel.name}`" in text and kernel.launch_site in text and kernel.grid in text
    assert f"`{facts.dominant_kernel}`" in text and "(dominant" in text
    assert "def launch" not in text  # no other contract form anywhere
    if role != "planner":
        assert "class ModelNew(nn.Module)" in messages[0]["content"]
        assert "must define: ModelNew" in text
    budget = BUDGETS["retry" if role == "retry" else role]
    assert messages_tokens(messages) <= budget


@pytest.mark.parametrize("problem", [KERNEL], indirect=True)
@pytest.mark.parametrize("role", ["planner", "executor"])
def test_kernel_prompt_has_every_fact_and_only_the_launch_form(problem, role):
    messages, target, facts = render(problem, role)
    text = _text(messages)
    assert target.kind == TargetKind.KERNEL
    _common_facts(text, facts, problem.compiled)
    per_kernel = {k["name"]: k["ms"] for k in _triage(KERNEL)["per_kernel"]}
    assert facts.baseline_ms == pytest.approx(per_kernel[target.kernels[0]])
    for arg in target.signature:  # the signature table: name, wrapper expr, role, layout
        row = f"| {arg.name} | {arg.expr} | {arg.role} |"
        assert row in text
        if arg.tensor is not None:
            assert f"| {list(arg.tensor.shape)} | {list(arg.tensor.stride)} |" in text
    (kernel,) = [k for k in problem.segment.kernels if k.name == target.kernels[0]]
    assert kernel.launch_site in text and f"grid: {kernel.grid}" in text
    if role == "executor":
        system = messages[0]["content"]
        assert "def launch(*args)" in system
        assert "ModelNew" not in system and "FUSION GROUP" not in system
    assert messages_tokens(messages) <= BUDGETS[role]


@pytest.mark.parametrize("problem", [KERNEL], indirect=True)
def test_a_huge_source_is_cut_deliberately_within_the_budget(problem):
    messages, target, _ = render(problem, "executor")
    huge = "# filler line of a very long kernel\n" * 4000
    source = problem.store.put_text(problem.store.get_text(target.source) + huge)
    from kernelopt.agents.messages import executor_messages
    from kernelopt.contracts.search import ExecuteInput, Plan, ProposerConfig

    inp = ExecuteInput(
        target=target,
        state_source=source,
        plan=Plan(direction="d", description="x"),
        proposer=ProposerConfig(),
    )
    cut = executor_messages(inp, problem.store)
    assert messages_tokens(cut) <= BUDGETS["executor"]
    assert "characters of the source cut here" in cut[1]["content"]
    assert messages_tokens(messages) < messages_tokens(cut)


@pytest.mark.parametrize("problem", [FORWARD], indirect=True)
def test_whole_model_contract_parser_and_detect_form_agree(problem):
    from kernelopt.compile.restitch import detect_form
    from kernelopt.errors import KernelOptError

    _, target, _ = render(problem, "executor")
    launch_only = (
        "```python\nimport triton\n@triton.jit\ndef k(x):\n    pass\ndef launch(*a):\n    pass\n```"
    )
    with pytest.raises(LLMReplyError, match="class ModelNew"):
        parse_kernel_reply(launch_only, entry_points_for(target))
    with pytest.raises(KernelOptError):
        detect_form(target, launch_only.strip("`python\n"))
    good = launch_only.replace("def launch(*a):\n    pass", "class ModelNew:\n    pass")
    source = parse_kernel_reply(good, entry_points_for(target))
    assert detect_form(target, source) == "forward"


def test_cli_prints_the_retry_messages(tmp_path, monkeypatch, capsys):
    from kernelopt.cli import main

    monkeypatch.setenv("KERNELOPT_HOME", str(tmp_path))
    code = main(["prompt", str(KERNEL), "--role", "retry", "--feedback", "gate said no", "--json"])
    assert code == 0
    messages = json.loads(capsys.readouterr().out)
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "user"]
    assert "gate said no" in messages[-1]["content"]
