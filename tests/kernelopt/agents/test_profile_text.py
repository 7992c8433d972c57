"""The profile a prompt shows for a state that could not be profiled: one line why, then the baseline's."""

from __future__ import annotations

import pytest

from kernelopt.agents.messages import planner_messages
from kernelopt.agents.result_text import render_profile_result, with_baseline
from kernelopt.contracts.compiled import SearchTarget, TargetKind
from kernelopt.contracts.search import (
    Analysis,
    Bottleneck,
    KernelProfile,
    PlanInput,
    ProfileResult,
    ProposerConfig,
)
from kernelopt.store import open_store

# the note of an H200 round-1 profile of an accepted candidate (before the harness fix)
FAILED_NOTE = (
    "captured harness: harness failed (exit 1): AttributeError: 'function' object has no "
    "attribute 'run'; built harness: harness failed (exit 1): AttributeError: 'function' "
    "object has no attribute 'run'"
)
FAILED = ProfileResult(
    profile=KernelProfile(source="none", note=FAILED_NOTE),
    analysis=Analysis(bottleneck=Bottleneck.UNKNOWN, reasoning="no profile"),
)
ROOT = ProfileResult(
    profile=KernelProfile(
        source="ncu",
        note="captured harness",
        duration_us=9.41,
        sol_compute_pct=28.4,
        sol_memory_pct=40.5,
        registers_per_thread=64,
        spills=0,
        achieved_occupancy_pct=34.0,
        top_rules=["[Compute Workload Analysis] All compute pipelines are under-utilized"],
    ),
    analysis=Analysis(
        bottleneck=Bottleneck.UNDERUTILIZED, reasoning="SOL compute 28.4%", advice="more work"
    ),
)


def test_an_unprofiled_state_shows_why_in_one_line_and_the_baseline_s_profile():
    profile, analysis = render_profile_result(with_baseline(FAILED, ROOT))
    lines = profile.splitlines()
    assert lines[0] == (
        "this state could not be profiled: captured harness: harness failed (exit 1): "
        "AttributeError: 'function' object has no attribute 'run'"
    )
    assert lines[1] == "the baseline's last profile (the root state's, not this state's):"
    assert "duration: 9.41 us" in profile and "SOL compute: 28.4%" in profile
    assert "n/a" not in profile
    assert analysis.startswith("(the baseline's) underutilized: SOL compute 28.4%")


@pytest.mark.parametrize(
    ("state", "root"),
    [(FAILED, None), (FAILED, FAILED)],
    ids=["no-root-profile", "root-unprofiled-too"],
)
def test_without_a_good_baseline_the_reason_stands_alone(state, root):
    profile, _ = render_profile_result(with_baseline(state, root))
    assert profile == (
        "this state could not be profiled: captured harness: harness failed (exit 1): "
        "AttributeError: 'function' object has no attribute 'run'"
    )


def test_a_profiled_state_and_a_missing_one_are_unchanged():
    assert with_baseline(ROOT, ROOT) is ROOT
    assert with_baseline(None, ROOT) is None
    good = ROOT.model_copy(update={"profile": ROOT.profile.model_copy(update={"note": "mine"})})
    assert with_baseline(good, ROOT) is good


def test_a_long_reason_is_cut_to_one_short_line():
    note = "profile failed: " + "x" * 1000 + "\nTraceback (most recent call last):\n  ..."
    failed = FAILED.model_copy(update={"profile": KernelProfile(source="none", note=note)})
    head = render_profile_result(failed)[0]
    assert "\n" not in head and len(head) < 300 and head.endswith("...")


def test_the_planner_prompt_carries_the_baseline_s_numbers(tmp_path):
    store = open_store(tmp_path / "artifacts")
    inp = PlanInput(
        target=SearchTarget(id="k0", kind=TargetKind.KERNEL, kernels=["triton_k"]),
        state_source=store.put_text("def launch(*args):\n    pass\n"),
        profile=with_baseline(FAILED, ROOT),
        proposer=ProposerConfig(),
        state_id="n1",
    )
    user = planner_messages(inp, store)[1]["content"]
    assert "this state could not be profiled: captured harness: harness failed" in user
    assert "the baseline's last profile (the root state's, not this state's):" in user
    assert "duration: 9.41 us" in user
    assert "built harness" not in user  # one reason, not every harness's


def test_the_l2_compression_finding_never_reaches_a_prompt():
    # stored profiles carry it (25 of 46 run-1 prompts); it never bore on a rewrite
    compression = (
        "[Memory Workload Analysis Chart] Out of the 77077536.0 bytes sent to the L2 "
        "Compression unit only 0.00% were successfully compressed."
    )
    rules = [compression, *ROOT.profile.top_rules]
    profile = ROOT.model_copy(
        update={"profile": ROOT.profile.model_copy(update={"top_rules": rules})}
    )
    text, _ = render_profile_result(profile)
    assert "Compression" not in text
    assert ROOT.profile.top_rules[0] in text
