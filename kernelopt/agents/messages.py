"""The chat messages each role sends, built in one place for the roles and ``kernelopt prompt``.

The roles call these builders, and so does the CLI that renders prompts for
reading, so what a user reads is exactly what a campaign sends.  Every
builder fits its messages into the role's token budget (``agents.budget``):
the current source, Inductor's kernels, the experience and the profile are
the inputs cut, in that order of size, and each cut says so in the prompt.
"""

from __future__ import annotations

from typing import Any

from kernelopt.agents import prompts, sections
from kernelopt.agents.budget import BUDGETS, Section, estimate_tokens, fit_sections
from kernelopt.agents.chat import Message
from kernelopt.agents.result_text import (
    render_profile_result,
    render_verdict_feedback,
)
from kernelopt.contracts.compiled import SearchTarget, TargetKind
from kernelopt.contracts.search import (
    ExecuteInput,
    Hardware,
    PlanInput,
    ProfileResult,
    PromptFacts,
)
from kernelopt.memory import ExperienceMemory, load_shared
from kernelopt.store import ArtifactStore


def candidate_contract() -> str:
    """The launch contract text, from the compile helper's module when it is there."""
    try:
        from kernelopt.compile.contract import CANDIDATE_CONTRACT  # type: ignore[import-not-found]
    except ImportError:
        return prompts.DEFAULT_CONTRACT
    return str(CANDIDATE_CONTRACT)


def entry_points_for(target: SearchTarget) -> list[str]:
    """Names a usable reply may define at module level (any one), as ``detect_form`` accepts.

    The prompt asks for one form (``sections.required_names``); a kernel
    target's drop-in Inductor form is still accepted because re-stitching
    takes it too.
    """
    if target.kind == TargetKind.FORWARD:
        return ["ModelNew"]
    if target.kind == TargetKind.FUSION_GROUP:
        return ["launch"]
    return ["launch", *target.kernels]


def target_kind(target: SearchTarget) -> str:
    return target.kind.value + (f": {', '.join(target.kernels)}" if target.kernels else "")


def retrieve_experience(inp: PlanInput | ExecuteInput, store: ArtifactStore, home: Any) -> str:
    """A role's memory for its prompt: the experience its input carries, else its memory
    retrieved by tags and keywords, bounded in tokens.

    The planner and the executor retrieve alike; only a planner's input may ask to read
    the cross-campaign store under ``home`` too.
    """
    if inp.experience:
        return inp.experience
    loaded = ExperienceMemory.load(store, inp.memory)
    shared = isinstance(inp, PlanInput) and inp.share_memory
    if shared and home is not None:
        loaded.merge(load_shared(home))
    if not len(loaded):
        return "(none yet)"
    target, profile = inp.target, inp.profile
    query = " ".join([*target.kernels, target.kind.value])
    if profile is not None:
        query += " " + profile.analysis.bottleneck.value + " " + " ".join(profile.profile.top_rules)
    chosen = loaded.retrieve(inp.memory_tags, query, max_tokens=inp.memory_max_tokens)
    return loaded.render(chosen) if chosen else "(none relevant)"


def _hardware(facts: PromptFacts | None, profile: ProfileResult | None) -> Hardware | None:
    if profile is not None and profile.hardware is not None:
        return profile.hardware  # read on the GPU worker: better than a stand-in
    return facts.hardware if facts else None


def _profiled(profile: ProfileResult | None) -> str:
    if profile is None or not profile.profile.kernel:
        return ""
    note = f"; {profile.profile.kernel_note}" if profile.profile.kernel_note else ""
    return f" (of `{profile.profile.kernel}`{note})"


def _description(target: SearchTarget) -> str:
    return f"{target.description}\n" if target.description else ""


def inductor_kernels_text(
    facts: PromptFacts | None, target: SearchTarget, store: ArtifactStore
) -> str:
    """Whole-model targets: Inductor's kernels, slowest first, metadata trimmed."""
    if target.kind != TargetKind.FORWARD:
        return ""
    if facts is None or not facts.inductor_kernels:
        names = ", ".join(target.kernels) or "none"
        return prompts.INDUCTOR_KERNELS.format(kernels=f"(sources not provided; kernels: {names})")
    parts = []
    for kernel in facts.inductor_kernels:
        head = f"### `{kernel.name}`"
        if kernel.ms is not None:
            head += f": {kernel.ms * 1000:.2f} us per forward"
        if kernel.name == facts.dominant_kernel:
            head += " (dominant: the most GPU time)"
        lines = [head]
        if kernel.launch:
            lines.append(
                f"launch {kernel.launch}" + (f"; grid {kernel.grid}" if kernel.grid else "")
            )
        if kernel.source is not None and store.exists(kernel.source):
            body = sections.trim_metadata(store.get_text(kernel.source)).strip()
            lines.append(f"```python\n{body}\n```")
        parts.append("\n".join(lines))
    return prompts.INDUCTOR_KERNELS.format(kernels="\n\n".join(parts))


def _common(
    target: SearchTarget,
    facts: PromptFacts | None,
    profile: ProfileResult | None,
    source: str,
    store: ArtifactStore,
) -> list[Section]:
    profile_text, analysis_text = render_profile_result(profile)
    hardware = _hardware(facts, profile)
    return [
        Section("description", _description(target)),
        Section("signature", sections.signature_table(target)),
        Section("launch", sections.launch_text(facts, target)),
        Section("numbers", sections.numbers_text(facts, hardware, target.kind)),
        Section("hardware", sections.hardware_text(hardware, facts)),
        Section("precision", sections.precision_text(facts)),
        Section("profiled", _profiled(profile)),
        Section("profile", profile_text, cuttable=True),
        Section("analysis", analysis_text),
        Section("source", sections.trim_metadata(source).strip(), cuttable=True),
        Section("inductor", inductor_kernels_text(facts, target, store), cuttable=True),
    ]


def _fill(template: str, system: str, parts: list[Section], budget: int, **fixed: Any) -> str:
    empty = template.format(**{s.name: "" for s in parts}, **fixed)
    texts = fit_sections(parts, len(system) + len(empty), budget)
    return template.format(**texts, **fixed)


def planner_messages(inp: PlanInput, store: ArtifactStore, home: Any = None) -> list[Message]:
    """System + user message of a planner call."""
    source = store.get_text(inp.state_source)
    system = prompts.PLANNER_SYSTEM.format(max_plans=inp.plans)
    banned = (
        prompts.PLANNER_BANNED.format(directions=", ".join(inp.banned_directions))
        if inp.banned_directions
        else ""
    )
    tried = (
        prompts.PLANNER_TRIED.format(
            plans="\n".join(f"- {p.direction}: {p.description[:200]}" for p in inp.tried_plans)
        )
        if inp.tried_plans
        else ""
    )
    experience = retrieve_experience(inp, store, home)
    parts = [
        *_common(inp.target, inp.facts, inp.profile, source, store),
        Section("experience", experience, cuttable=True),
        Section("banned", banned),
        Section("tried", tried, cuttable=True),
    ]
    user = _fill(
        prompts.PLANNER_USER,
        system,
        parts,
        BUDGETS["planner"],
        state_id=inp.state_id or "root",
        target_id=inp.target.id,
        target_kind=target_kind(inp.target),
        speedup=f"{inp.state_speedup:.3f}x" if inp.state_speedup else "1.000x (root)",
        max_plans=inp.plans,
    )
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


def executor_messages(inp: ExecuteInput, store: ArtifactStore, home: Any = None) -> list[Message]:
    """System + user message of an executor's first attempt."""
    source = store.get_text(inp.state_source)
    contract = inp.contract or sections.contract_form(inp.target, candidate_contract())
    system = prompts.EXECUTOR_SYSTEM.format(contract=contract)
    experience = retrieve_experience(inp, store, home)
    siblings = siblings_text(inp.siblings)
    parts = [
        *_common(inp.target, inp.facts, inp.profile, source, store),
        Section("experience", experience, cuttable=True),
        Section("siblings", siblings, cuttable=True),
        Section("plan", inp.plan.description),
    ]
    user = _fill(
        prompts.EXECUTOR_USER,
        system,
        parts,
        BUDGETS["executor"],
        target_id=inp.target.id,
        target_kind=target_kind(inp.target),
        entry_points=", ".join(_asked(inp)),
        direction=inp.plan.direction,
    )
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


def siblings_text(lines: list[str]) -> str:
    """The sibling section, or nothing when no sibling has a result yet (an empty heading
    only costs tokens and says nothing)."""
    if not lines:
        return ""
    return prompts.SIBLINGS.format(lines="\n".join(f"- {line.lstrip('- ')}" for line in lines))


def _asked(inp: ExecuteInput) -> list[str]:
    return inp.entry_points or sections.required_names(inp.target)


def retry_message(inp: ExecuteInput, conversation: list[Message]) -> Message:
    """The user message of a retry: the rejection (or the timing result) to act on, and the
    siblings' results known by now (the first turn's list was written before any).

    The feedback is cut to what the retry budget leaves after the conversation
    so far.
    """
    asked = ", ".join(_asked(inp))
    if inp.timing:
        template, feedback = prompts.RETRY_TIMING_USER, inp.timing
    else:
        template = prompts.RETRY_FIX_USER
        feedback = render_verdict_feedback(inp.verdicts, inp.feedback if not inp.verdicts else "")
    used = sum(estimate_tokens(m.get("content", "")) for m in conversation)
    room = max(BUDGETS["retry"] - used, 400)
    texts = fit_sections(
        [
            Section("feedback", feedback, cuttable=True),
            Section("siblings", siblings_text(inp.siblings), cuttable=True),
        ],
        len(template.format(feedback="", siblings="", entry_points=asked)),
        room,
    )
    return {
        "role": "user",
        "content": template.format(**texts, entry_points=asked),
    }
