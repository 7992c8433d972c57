"""The campaign report says what each decision meant, not just accept/reject."""

from __future__ import annotations

from kernelopt.contracts import ArtifactRef, Decision, Outcome, OutcomeCategory
from kernelopt.contracts.search import Candidate
from kernelopt.report import render_markdown


def _decision(cid: str, accepted: bool, retime: bool = False, gate: str = "") -> Decision:
    cand = Candidate(id=cid, target_id="forward", parent_id=None, iteration=0, source=None)
    return Decision(
        candidate=cand, accepted=accepted, retime=retime, deciding_gate=gate, reason="r"
    )


def _outcome(**fields) -> Outcome:
    return Outcome(campaign_id="c", problem="p", **fields)


def test_slow_candidates_read_as_passed_not_accepted_into_the_model() -> None:
    outcome = _outcome(
        category=OutcomeCategory.FALLBACK,
        speedup=1.0,
        reason="none faster",
        baseline_ms=0.068,
        candidates_tried=3,
        candidates_accepted=2,
    )
    md = render_markdown(
        outcome,
        [
            _decision("a", True),
            _decision("b", False, gate="correctness"),
            _decision("a", True, retime=True),
            _decision("c", False, retime=True, gate="retime"),
        ],
    )
    rows = [
        line
        for line in md.splitlines()
        if line.startswith("| a |") or line.startswith("| b |") or line.startswith("| c |")
    ]
    assert [r.split(" | ")[6] for r in rows] == [
        "passed",
        "rejected",
        "re-timed",
        "dropped at re-timing",
    ]
    assert "| candidates tried / passed gates 1-2 | 3 / 2 |" in md
    assert "| replaced | nothing (baseline returned) |" in md
    assert "| returned model | 0.0680 ms |" in md


def test_the_report_says_which_form_the_returned_model_has() -> None:
    ref = ArtifactRef(sha256="cd" * 32, size=10, name="p_forward.py")
    kept = _outcome(
        category=OutcomeCategory.OPTIMIZED, speedup=1.2, reason="1 replacement", wrapper=ref
    )
    assert "`call(args)`" in render_markdown(kept, [])
    as_model = kept.model_copy(update={"source_kind": "forward"})
    assert "the problem file with `ModelNew`" in render_markdown(as_model, [])


def test_model_gate_rows_name_the_candidate_they_judged() -> None:
    from kernelopt.contracts.verdicts import GateName, GateStatus, GateVerdict

    outcome = _outcome(
        category=OutcomeCategory.OPTIMIZED,
        speedup=1.4,
        reason="1 replacement(s) verified on the whole model",
        model_verdicts=[
            GateVerdict(gate=GateName.MODEL, status=GateStatus.FAIL, reason="rho 133 > 10"),
            GateVerdict(gate=GateName.PERFORMANCE, status=GateStatus.PASS, reason="1.4x | ok"),
        ],
        model_trials=["forward:i0-s0-p0-a0", "forward:i0-s0-p2-a1"],
    )
    md = render_markdown(outcome, [])
    assert "| forward:i0-s0-p0-a0 | model | fail | rho 133 > 10 |" in md
    assert "| forward:i0-s0-p2-a1 | performance | pass | 1.4x / ok |" in md
    # outcomes from before model_trials existed still render, without the ids
    older = render_markdown(outcome.model_copy(update={"model_trials": []}), [])
    assert "| - | model | fail | rho 133 > 10 |" in older


def test_a_kernel_problem_reads_against_its_own_kernel_and_an_unbounded_ceiling() -> None:
    from kernelopt.compile.triage import summarize
    from kernelopt.contracts.compiled import KernelTiming, SearchMode
    from kernelopt.contracts.problem import ProblemKind

    # the file's kernel is not an Inductor kernel, so triage counts it outside Triton (f = 1)
    triage = summarize(
        [KernelTiming(name="rms_norm_kernel", ms=0.064, is_library=True)], [], SearchMode.SINGLE
    )
    outcome = _outcome(
        category=OutcomeCategory.FALLBACK,
        speedup=1.0,
        reason="none faster",
        baseline_ms=0.0686,
        compile_mode="helion-autotuned:quick",
        baseline_note="helion kernel problem: autotuned at effort quick (budget 120 s)",
        kind=ProblemKind.HELION,
        mode=SearchMode.SINGLE,
        triage=triage,
    )
    md = render_markdown(outcome, [])
    assert "over the file's own Helion kernel (`helion-autotuned:quick`)" in md
    assert "torch.compile" not in md
    assert "| baseline | 0.0686 ms (helion kernel problem: autotuned at effort quick" in md
    assert "the ceiling uses f = 0" in md and "Library fraction" not in md
    assert "| model ceiling | 2.000x | 5.000x | 10.000x | unbounded |" in md
    module = render_markdown(outcome.model_copy(update={"kind": ProblemKind.MODULE}), [])
    assert "over torch.compile (`helion-autotuned:quick`)" in module


def _busy_report(busy) -> list[str]:
    md = render_markdown(
        _outcome(category=OutcomeCategory.FALLBACK, speedup=1.0, reason="r"), [], busy
    )
    return [line for line in md.splitlines() if line.startswith("GPU busy during search")]


def test_gpu_busy_reads_not_measured_with_its_reason() -> None:
    from kernelopt.gpu_busy import NVML_UNAVAILABLE, CampaignBusy

    assert _busy_report(CampaignBusy(measured=False, reason=NVML_UNAVAILABLE)) == [
        "GPU busy during search: not measured (NVML not available)."
    ]
    assert _busy_report(None) == [
        "GPU busy during search: not measured (no GPU worker recorded samples for it)."
    ]


def test_gpu_busy_states_the_search_span_and_the_target() -> None:
    from kernelopt.gpu_busy import BusyTotals, CampaignBusy

    def busy(gpu_sum: float) -> CampaignBusy:
        span = BusyTotals(samples=40, busy_samples=36, gpu_sum=gpu_sum, memory_sum=400, seconds=7.8)
        return CampaignBusy(
            measured=True,
            activities=3,
            search_activities=2,
            search_span=span,
            search_span_seconds=8.0,
            while_searching=span,
            all_activities=span,
        )

    assert _busy_report(busy(3400)) == [
        "GPU busy during search: 85% (40 samples over 8.0 s); this meets the 80% target."
    ]
    assert _busy_report(busy(2000)) == [
        "GPU busy during search: 50% (40 samples over 8.0 s); this is below the 80% target."
    ]
    md = render_markdown(
        _outcome(category=OutcomeCategory.FALLBACK, speedup=1.0, reason="r"), [], busy(2000)
    )
    assert "| search span | 50% | 10% | 90% | 40 | 8.0 |" in md
    assert "| all GPU activities (3) | 50% | 10% | 90% | 40 | 7.8 |" in md


def test_the_target_table_says_what_gamma_needs_and_why_a_target_is_searched_last() -> None:
    from kernelopt.compile.triage import summarize
    from kernelopt.contracts.compiled import KernelTiming, SearchMode, SearchTarget, TargetKind

    per = [
        KernelTiming(name="mm", ms=3.0, is_library=True),
        KernelTiming(name="k_big", ms=6.0, is_library=False),
        KernelTiming(name="k_small", ms=1.0, is_library=False),
    ]
    targets = [
        SearchTarget(id=k, kind=TargetKind.KERNEL, kernels=[k]) for k in ("k_big", "k_small")
    ]
    triage = summarize(
        per,
        targets,
        SearchMode.MULTI,
        floor_bytes={"k_big": int(5.88e9), "k_small": int(0.07e9)},  # 98% and 7% of 1000 GB/s
        bandwidth_gbs=1000.0,
    )
    outcome = _outcome(
        category=OutcomeCategory.FALLBACK,
        speedup=1.0,
        reason="none faster",
        mode=SearchMode.MULTI,
        triage=triage,
    )
    md = render_markdown(outcome, [])
    assert "| 1 | k_small | kernel | 10.00% | 1.111x | 1.411x | 14.29x |" in md
    assert "| 2 | k_big | kernel | 60.00% | 2.500x | 1.051x | 1.02x (short: searched last) |" in md
    assert f"Bandwidth headroom: {triage.headroom_rule}." in md
    assert (
        "- `k_big`: bandwidth headroom 1.02x (98% of peak) < required 1.051x: cannot reach "
        "gamma = 1.03 without moving fewer bytes" in md
    )
    # a triage recorded before the rule existed: no headroom, no rule line
    older = triage.model_copy(update={"headroom": [], "headroom_rule": ""})
    md = render_markdown(outcome.model_copy(update={"triage": older}), [])
    assert "| 2 | k_big | kernel | 60.00% | 2.500x | 1.051x | - |" in md
    assert "Bandwidth headroom" not in md


def test_the_replaced_row_names_each_replacements_family() -> None:
    won = {"category": OutcomeCategory.OPTIMIZED, "reason": "r", "speedup": 1.2}
    both = _outcome(replaced=["k0", "k1"], replaced_by=["template", "llm"], **won)
    assert "| replaced | k0 (template), k1 (llm) |" in render_markdown(both, [])
    older = _outcome(replaced=["k0"], **won)  # written before the families were kept
    assert "| replaced | k0 |" in render_markdown(older, [])
