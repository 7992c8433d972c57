"""Issue 29 point 5 on a real multi-kernel model: its whole-model target, built and rendered.

Shared by the CPU test (tests/kernelopt/profiling/test_dominant.py, on the committed
fixture's triage) and the GPU test (tests/e2e/test_gpu_profile.py, on a triage measured
there), so the two read the target, the kernel times and the prompt the same way -- the
way a campaign does:

* the forward target: ``compile.segment`` with the mode forced to single (the transformer
  block is multi-kernel, so its automatic mode is multi and has no forward target);
* the kernel times: ``agents.facts.build_facts`` from the triage, then the facts'
  ``inductor_kernels`` as ``SearchKernel._kernel_times`` hands them to the profiler;
* the prompt: ``agents.messages.executor_messages`` with those facts and the profile.
"""

from __future__ import annotations

from kernelopt.agents.facts import build_facts
from kernelopt.agents.messages import executor_messages
from kernelopt.compile.segment import segment
from kernelopt.contracts.compiled import (
    CompileResult,
    SearchMode,
    SearchTarget,
    SegmentInput,
    SegmentResult,
    TargetKind,
    TriageResult,
)
from kernelopt.contracts.search import (
    ExecuteInput,
    Plan,
    ProfileInput,
    ProfileResult,
    PromptFacts,
    ProposerConfig,
)
from kernelopt.store import ArtifactStore
from tests.support.wrappers import FIXTURES, ROOT

# 11 Triton kernels; the first (a layer norm) is among the smallest, two matmul templates
# the largest (H200 triage: ~10.5 and ~10.1 us against ~2.5 us for the first)
FIXTURE = "level3_002_transformer_block"
PROBLEM = ROOT / "problems" / "level3" / "002_transformer_block.py"
DOMINANT_MARK = "(dominant: the most GPU time)"  # agents.messages.inductor_kernels_text


def recorded() -> CompileResult:
    """The committed H200 compile record of the fixture."""
    return CompileResult.model_validate_json((FIXTURES / f"{FIXTURE}.compile.json").read_text())


def recorded_triage() -> TriageResult:
    """The committed H200 triage of the fixture (per-kernel GPU ms in the model)."""
    return TriageResult.model_validate_json((FIXTURES / f"{FIXTURE}.triage.json").read_text())


def wrapper() -> str:
    return (FIXTURES / f"{FIXTURE}.py.txt").read_text()


def stored(store: ArtifactStore) -> CompileResult:
    """The recorded compile with its wrapper and problem source in ``store`` (no CUDA):
    what segmentation and the harness writer read."""
    compiled = recorded()
    assert store.put_text(wrapper(), "text/x-python").sha256 == compiled.wrapper.sha256
    source = store.put_text(PROBLEM.read_text(), "text/x-python", PROBLEM.name)
    assert source.sha256 == compiled.problem.source.sha256
    return compiled


def forward_target(
    compiled: CompileResult, store: ArtifactStore
) -> tuple[SegmentResult, SearchTarget]:
    """The segmentation and whole-model target a campaign run with ``--mode single`` gets."""
    seg = segment(SegmentInput(compiled=compiled, mode=SearchMode.SINGLE), store)
    forward = next(t for t in seg.targets if t.kind == TargetKind.FORWARD)
    assert forward.kernels == [k.name for k in seg.kernels] and len(forward.kernels) > 1
    assert forward.source == compiled.problem.source  # the root state is the problem file
    return seg, forward


def facts_and_times(
    compiled: CompileResult, seg: SegmentResult, forward: SearchTarget, triage: TriageResult
) -> tuple[PromptFacts, dict[str, float]]:
    """The target's prompt facts and the kernel times its profile gets
    (``workflows.search_kernel.SearchKernel._kernel_times``)."""
    facts = build_facts(compiled, seg, forward, triage)
    return facts, {k.name: k.ms for k in facts.inductor_kernels if k.ms}


def root_profile_input(
    compiled: CompileResult,
    seg: SegmentResult,
    forward: SearchTarget,
    times: dict[str, float],
    timeout_s: float = 600.0,
) -> ProfileInput:
    """What the campaign's profile activity gets for the forward target's root state."""
    return ProfileInput(
        compiled=compiled,
        segment=seg,
        target=forward,
        source=forward.source,
        state_id="root",
        kernel_times=times,
        timeout_s=timeout_s,
    )


def executor_text(
    forward: SearchTarget, facts: PromptFacts, profile: ProfileResult, store: ArtifactStore
) -> str:
    """The executor's first request for the root state, as one text."""
    execute = ExecuteInput(
        target=forward,
        state_source=forward.source,
        plan=Plan(direction="probe", description="(issue 29 point 5: the prompt's facts)"),
        proposer=ProposerConfig(),
        facts=facts,
        profile=profile,
    )
    return "\n".join(m["content"] for m in executor_messages(execute, store))


def check_prompt(text: str, dominant: str, why: str) -> list[str]:
    """What the prompt says of the dominant kernel: its heading among Inductor's kernels,
    marked dominant, and the profile section naming it as the profiled kernel."""
    heading = next((line for line in text.splitlines() if line.startswith(f"### `{dominant}`")), "")
    assert heading, f"no heading for {dominant} among Inductor's kernels"
    assert DOMINANT_MARK in heading, heading
    marked = [line for line in text.splitlines() if DOMINANT_MARK in line]
    assert marked == [heading], marked  # one kernel only is called dominant
    profiled = f"(of `{dominant}`; {why})"
    assert profiled in text, f"the profile section does not say {profiled}"
    return [heading, profiled]
