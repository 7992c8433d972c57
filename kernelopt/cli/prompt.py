"""``kernelopt prompt FILE [--role planner|executor|retry] [--target ID] [--mode M] [--json]``.

Renders the exact messages a campaign's agents would send for one search
target, so users (and tests) can read what the model is told.  FILE is a
problem file whose compile is cached under ``$KERNELOPT_HOME`` (no GPU
needed: the cached wrapper is segmented here), or a fixture set on the CPU:
``NAME.compile.json`` with ``NAME.segment.json``, ``NAME.triage.json`` and
the wrapper ``NAME.py.txt`` beside it.  Without a GPU, the hardware line is a
documented stand-in (``agents.facts.stand_in_hardware``).  The executor gets
the plan from ``--plan``; the retry renders the first attempt, a placeholder
reply and the retry message built from ``--feedback``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from kernelopt.contracts.compiled import (
    CompileResult,
    SearchMode,
    SearchTarget,
    SegmentInput,
    SegmentResult,
    TriageResult,
)
from kernelopt.contracts.search import ExecuteInput, Plan, PlanInput, PromptFacts, ProposerConfig
from kernelopt.errors import KernelOptError
from kernelopt.pyfile import read_source
from kernelopt.store import ArtifactStore, open_store

if TYPE_CHECKING:  # the agents import openai (~0.5 s): only when a prompt is rendered
    from kernelopt.agents.chat import Message

ROLES = ("planner", "executor", "retry")
EXAMPLE_PLAN = Plan(
    direction="(your plan)",
    description="(the planner's plan goes here: pass one with --plan 'direction: description')",
)
PLACEHOLDER_REPLY = "(the model's first reply goes here)"
PLACEHOLDER_FEEDBACK = "(the gate's feedback goes here: pass it with --feedback)"


class PromptInputError(KernelOptError):
    """FILE is neither a fixture set nor a problem with a cached compile."""


@dataclass
class Problem:
    compiled: CompileResult
    segment: SegmentResult
    triage: TriageResult | None
    wrapper: str
    store: ArtifactStore


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register ``kernelopt prompt`` on the main parser."""
    p = sub.add_parser("prompt", help="render the messages the agents would send for a target")
    p.add_argument("file", type=Path, help="a problem file (cached compile) or NAME.compile.json")
    p.add_argument("--role", choices=ROLES, default="executor")
    p.add_argument("--target", default=None, help="target id (default: the first target)")
    p.add_argument("--mode", choices=[m.value for m in SearchMode], default=None)
    p.add_argument("--plan", default=None, help="'direction: description' for the executor")
    p.add_argument("--feedback", default=None, help="the rejection text for --role retry")
    p.add_argument("--json", action="store_true", help="print the messages as JSON")


def _fixture(path: Path, store: ArtifactStore) -> Problem:
    stem = str(path).removesuffix(".compile.json")
    compiled = CompileResult.model_validate_json(Path(f"{stem}.compile.json").read_text())
    segment = SegmentResult.model_validate_json(Path(f"{stem}.segment.json").read_text())
    triage_path = Path(f"{stem}.triage.json")
    triage = (
        TriageResult.model_validate_json(triage_path.read_text()) if triage_path.is_file() else None
    )
    wrapper = Path(f"{stem}.py.txt").read_text()
    store.put_text(wrapper, "text/x-python", compiled.wrapper.name)
    problem_file = Path(compiled.problem.path)
    if not problem_file.is_file():  # captured elsewhere: the same layout under this checkout
        problem_file = (
            Path(__file__).resolve().parents[1]
            / "problems"
            / (f"level{compiled.problem.level}/{problem_file.name}")
        )
    if problem_file.is_file():
        store.put_text(read_source(problem_file), "text/x-python", problem_file.name)
    from kernelopt.compile.segment import segment as run_segment

    # segmenting the wrapper again stores its kernel sources (same digests as the fixture's)
    segment = run_segment(SegmentInput(compiled=compiled, mode=segment.mode), store)
    return Problem(compiled, segment, triage, wrapper, store)


def _cached(path: Path) -> Problem:
    from kernelopt.compile.cache import cache_dir

    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    store = open_store()
    found: list[tuple[float, CompileResult]] = []
    for entry in cache_dir().glob("*.json") if cache_dir().is_dir() else []:
        try:
            result = CompileResult.model_validate_json(entry.read_text())
        except ValueError:
            continue
        if result.problem.source.sha256 == digest and store.exists(result.wrapper):
            found.append((entry.stat().st_mtime, result))
    if not found:
        raise PromptInputError(
            f"no cached compile of {path} under {cache_dir()}: run `kernelopt triage {path}` "
            "on a GPU machine first, or pass a fixture NAME.compile.json"
        )
    compiled = max(found, key=lambda f: f[0])[1]
    if not store.exists(compiled.problem.source):
        store.put_bytes(path.read_bytes(), "text/x-python", path.name)
    from kernelopt.compile.segment import segment

    seg = segment(SegmentInput(compiled=compiled), store)
    return Problem(compiled, seg, None, store.get_text(compiled.wrapper), store)


def _resegment(problem: Problem, mode: str | None) -> SegmentResult:
    if mode is None or mode == problem.segment.mode.value:
        return problem.segment
    from kernelopt.compile.segment import segment

    return segment(SegmentInput(compiled=problem.compiled, mode=SearchMode(mode)), problem.store)


def _target(
    segment: SegmentResult, triage: TriageResult | None, wanted: str | None
) -> SearchTarget:
    shares = {t.id: t.share for t in triage.targets} if triage else {}
    targets = [t.model_copy(update={"share": shares.get(t.id, t.share)}) for t in segment.targets]
    if not targets:
        raise PromptInputError("the segment has no search targets")
    if wanted is None:
        return targets[0]
    for target in targets:
        if target.id == wanted:
            return target
    raise PromptInputError(f"no target {wanted!r}; targets: {', '.join(t.id for t in targets)}")


def render(
    problem: Problem,
    role: str,
    target_id: str | None = None,
    mode: str | None = None,
    plan: Plan | None = None,
    feedback: str | None = None,
) -> tuple[list[Message], SearchTarget, PromptFacts]:
    """The messages ``role`` would send for the target, built by the campaign's own builders."""
    from kernelopt.agents import messages
    from kernelopt.agents.facts import build_facts, stand_in_hardware, with_context

    segment = _resegment(problem, mode)
    triage = problem.triage if problem.triage and problem.triage.mode == segment.mode else None
    target = _target(segment, triage, target_id)
    if target.source is None:
        raise PromptInputError(f"target {target.id} has no source")
    compiled = problem.compiled
    hardware = stand_in_hardware(compiled.gpu_name, problem.wrapper)
    facts = build_facts(compiled, segment, target, triage, hardware)
    facts = with_context(facts, compiled, segment, target, triage)
    config = ProposerConfig()
    if role == "planner":
        inp = PlanInput(target=target, state_source=target.source, proposer=config, facts=facts)
        return messages.planner_messages(inp, problem.store), target, facts
    execute = ExecuteInput(
        target=target,
        state_source=target.source,
        plan=plan or EXAMPLE_PLAN,
        proposer=config,
        facts=facts,
    )
    first = messages.executor_messages(execute, problem.store)
    if role == "executor":
        return first, target, facts
    conversation = [*first, {"role": "assistant", "content": PLACEHOLDER_REPLY}]
    retry = execute.model_copy(update={"feedback": feedback or PLACEHOLDER_FEEDBACK, "attempt": 1})
    return [*conversation, messages.retry_message(retry, conversation)], target, facts


def load(path: Path, store: ArtifactStore) -> Problem:
    """A fixture set (NAME.compile.json) or a problem file with a cached compile."""
    if str(path).endswith(".compile.json"):
        return _fixture(path, store)
    if not path.is_file():
        raise PromptInputError(f"{path} does not exist")
    return _cached(path)


def _plan(text: str | None) -> Plan | None:
    if not text:
        return None
    direction, _, description = text.partition(":")
    return Plan(direction=direction.strip(), description=(description or direction).strip())


def cmd_prompt(args: argparse.Namespace, settings: object = None) -> int:
    from rich.console import Console
    from rich.rule import Rule

    from kernelopt.agents.budget import BUDGETS, messages_tokens

    console = Console()
    with tempfile.TemporaryDirectory(prefix="kernelopt-prompt-") as tmp:
        problem = load(args.file, open_store(Path(tmp)))
        msgs, target, _ = render(
            problem, args.role, args.target, args.mode, _plan(args.plan), args.feedback
        )
    if args.json:
        console.print_json(json.dumps(msgs))
        return 0
    budget = BUDGETS["retry" if args.role == "retry" else args.role]
    for message in msgs:
        content = message["content"]
        console.print(Rule(f"{message['role']} ({len(content)} chars)"))
        console.print(content, markup=False, highlight=False, soft_wrap=True)
    console.print(
        Rule(
            f"{args.role} for target {target.id}: ~{messages_tokens(msgs)} tokens estimated "
            f"(chars / 4), budget {budget}"
        )
    )
    return 0
