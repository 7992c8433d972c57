"""Screening on the GPU: a real Inductor compile, the built-in proposer's variants, do_bench.

Prints (and writes to ``$KERNELOPT_GATES_OUT/screen_gpu.txt``) the seconds one
screening round and each candidate in it cost, next to one ``gate_candidate``
on the same target: the numbers issue 22's two tiers are about.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from gates.screening import screen_candidates
from kernelopt.contracts import CompileInput, ProblemSpec, SegmentInput
from kernelopt.contracts.compiled import TargetKind
from kernelopt.contracts.screening import ScreenCandidate, ScreenInput
from kernelopt.contracts.search import BuiltinProposeInput
from kernelopt.contracts.verdicts import GateSettings
from kernelopt.store import open_store
from tests.support.gating import gate_source
from tests.support.linear_gelu import add_to_stores, linear_gelu_problem

pytestmark = pytest.mark.gpu

PROBLEM = linear_gelu_problem(8192, " * 1.5 + 0.25")


def test_a_round_of_builtin_variants_screens_in_a_fraction_of_one_gate(tmp_path: Path) -> None:
    from kernelopt.compile.segment import segment
    from kernelopt.kinds.registry import compile_problem
    from kernelopt.proposer import builtin

    store = open_store(tmp_path / "artifacts")
    spec = ProblemSpec(name="linear_gelu_s", source=store.put_text(PROBLEM, name="lg.py"))
    comp = compile_problem(
        CompileInput(problem=spec, mode="default", measure_default_mode=False), store
    )
    seg = segment(SegmentInput(compiled=comp), store)
    targets = [t for t in seg.targets if t.kind == TargetKind.KERNEL and t.source is not None]
    if not targets:
        pytest.skip(f"no kernel target ({seg.mode.value}: {seg.mode_reason})")
    target = targets[0]
    proposed = builtin.propose(
        BuiltinProposeInput(
            compiled=comp, segment=seg, target=target, state_source=target.source, count=6
        ),
        store,
    )
    cands = [
        ScreenCandidate(candidate_id=f"v{i}", source=v.source)
        for i, v in enumerate(proposed.variants)
    ]
    cands.append(ScreenCandidate(candidate_id="identity", source=target.source))
    wrong = store.put_text(add_to_stores(store.get_text(target.source), "0.5"), name="wrong.py")
    cands.append(ScreenCandidate(candidate_id="wrong", source=wrong))
    started = time.perf_counter()
    result = screen_candidates(
        ScreenInput(compiled=comp, segment=seg, target=target, candidates=cands), store
    )
    round_s = time.perf_counter() - started
    started = time.perf_counter()
    gated = gate_source(
        store, comp, seg, target, target.source, "identity", settings=GateSettings(device="cuda")
    )
    gate_s = time.perf_counter() - started
    by_id = {e.candidate_id: e for e in result.estimates}
    lines = [
        f"screening round: {round_s:.2f} s for {len(cands)} candidates "
        f"({result.child_starts} child, re-screened {result.rescreened}); "
        f"gate_candidate (identity): {gate_s:.2f} s, "
        f"per-kernel {gated.baseline_kernel_ms} ms -> {gated.kernel_ms} ms",
        *(
            f"  {e.candidate_id}: smoke={e.smoke_ok} est={e.estimated_speedup} "
            f"({e.estimated_ms} ms vs {e.baseline_ms} ms) {e.seconds:.3f} s {e.smoke_note[:80]}"
            for e in result.estimates
        ),
    ]
    text = "\n".join(lines)
    print("\n" + text)
    out = Path(os.environ.get("KERNELOPT_GATES_OUT", "/tmp")) / "screen_gpu.txt"
    out.write_text(text + "\n")
    assert gated.passed
    assert not by_id["wrong"].smoke_ok and "max abs error" in by_id["wrong"].smoke_note
    identity = by_id["identity"]
    assert identity.smoke_ok and 0.5 < identity.estimated_speedup < 2.0  # itself, roughly
    assert all(e.smoke_ok for e in result.estimates if e.candidate_id.startswith("v"))
    assert round_s < gate_s
    # no honest candidate (nor a wrong one) leaves threads or a changed baseline behind
    assert result.rescreened == [] and result.child_starts == 1
