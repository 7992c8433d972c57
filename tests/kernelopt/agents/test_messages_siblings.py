"""The sibling section: left out while no sibling has a result, and in a retry the results
known by then (the first turn's list was written before any)."""

from __future__ import annotations

from pathlib import Path

from kernelopt.agents.messages import executor_messages, retry_message
from kernelopt.cli.prompt import load, render
from kernelopt.contracts.search import ExecuteInput, Plan, ProposerConfig
from kernelopt.store import ArtifactStore, open_store

FORWARD = (
    Path(__file__).resolve().parents[2]
    / "fixtures"
    / "wrappers"
    / "level1_009_softmax_rows.compile.json"
)
SIBLING = (
    "- persistent grid: correct, the whole forward with its kernel in place: 246.7 us vs the "
    "baseline's 229.7 us (0.931x); noise 0.7% (spread of the timing rounds); the difference is "
    "beyond this noise [plan: One program per SM loops over rows with a prefetch.]"
)


def _input(tmp_path: Path, siblings: list[str], **kw) -> tuple[ExecuteInput, ArtifactStore]:
    problem = load(FORWARD, open_store(tmp_path))
    _, target, _ = render(problem, "executor")
    inp = ExecuteInput(
        target=target,
        state_source=target.source,
        plan=Plan(direction="single-read rows", description="read each row once"),
        proposer=ProposerConfig(),
        siblings=siblings,
        **kw,
    )
    return inp, problem.store


def test_the_sibling_section_is_left_out_when_there_are_none(tmp_path):
    inp, store = _input(tmp_path, [])
    text = executor_messages(inp, store)[1]["content"]
    assert "Sibling" not in text  # no heading over "(none yet)"
    inp, store = _input(tmp_path / "b", [SIBLING])
    text = executor_messages(inp, store)[1]["content"]
    assert "## Sibling attempts on this state" in text
    assert SIBLING in text


def test_a_retry_lists_the_siblings_known_by_then(tmp_path):
    inp, store = _input(tmp_path, [SIBLING], timing="Your module is correct, 0.982x: slower.")
    first = executor_messages(inp.model_copy(update={"siblings": []}), store)
    message = retry_message(inp, first)["content"]
    assert message.startswith("Your module is correct, 0.982x")
    assert "## Sibling attempts on this state" in message and SIBLING in message
    assert "Make it faster" in message
    fix = inp.model_copy(update={"timing": "", "feedback": "no code block"})
    message = retry_message(fix, first)["content"]
    assert message.startswith("Your module was rejected.") and SIBLING in message
    alone = retry_message(fix.model_copy(update={"siblings": []}), first)["content"]
    assert "Sibling attempts" not in alone
