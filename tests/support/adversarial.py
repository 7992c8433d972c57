"""The adversarial candidate set: one candidate per cheat class, plus honest ones.

Each ``Case`` names a candidate file (``tests/fixtures/candidates/gates/``), the problem
it targets (``tests/problems/gates/``), the cheat class, the expected outcome
and the gates allowed to decide it.  ``run_suite`` checks every case the way
a batch of campaign candidates would be: references once per problem and
gates 1-3 in parallel (fresh processes each), then gate 4 one candidate at a
time (timing must own the device).  CPU tests and the GPU script share it.
"""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from gates.cascade import baseline_source, check_candidate, time_candidate
from gates.gpu_lease import gpu_section
from gates.protocol import TimingJob
from gates.reference import ReferenceBundle, prepare_reference
from gates.runner import run_job
from kernelopt.contracts.verdicts import CascadeResult, GateSettings

HERE = Path(__file__).resolve().parent
PROBLEMS = HERE.parent / "problems" / "gates"
CANDIDATES = HERE.parent / "fixtures" / "candidates" / "gates"

# Kept out of the candidates folder so ruff and pytest never try to parse it.
SYNTAX_ERROR_SOURCE = '''"""Broken -- does not even parse."""
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self x):
        return x
'''

BOTH = ("cpu", "cuda")
NO_WIN_GPU_WORK_MAX = 1.10  # a no-win case's GPU work may look this much faster (noise)
GPU = ("cuda",)


@dataclass(frozen=True)
class Case:
    candidate: str
    problem: str
    cheat: str  # the cheat class, or "honest"
    # "accept", "reject", or "no_win": rejected at `gates`, or accepted with no speed
    # claim (CPU), not optimized, or optimized only by dispatch with its GPU work no faster
    expect: str
    gates: tuple[str, ...] = ()  # gates allowed to decide a rejection
    devices: tuple[str, ...] = BOTH
    timeout_s: float | None = None  # static/correctness child timeout override
    perf_on_cpu: bool = False  # run gate 4 in the CPU suite too (host timer, eager baseline)
    min_speedup: float | None = None  # accepted candidates: at least this speedup (GPU)
    gpu_expect: str | None = None  # a different expectation on CUDA (real speed verdicts)


def _timed_on_cpu(candidate: str, cheat: str, expect: str = "reject", **more: Any) -> Case:
    """A case gate 4 decides on swish_bias, timed in the CPU suite too (most timing cheats)."""
    return Case(candidate, "swish_bias", cheat, expect, ("performance",), perf_on_cpu=True, **more)


CASES: tuple[Case, ...] = (
    # --- the cheat classes a naive checker accepted on our H200 -------------------------
    Case(
        "partial_write",
        "swish_bias",
        "partial write into recycled memory",
        "reject",
        ("correctness",),
    ),
    Case("pointer_cache", "gelu", "pointer-keyed output cache", "reject", ("correctness",)),
    Case(
        "zeros_tiny", "tiny_scale", "zeros under an absolute tolerance", "reject", ("correctness",)
    ),
    Case("fp16_matmul", "matmul", "fp16 arithmetic", "reject", ("correctness", "model")),
    Case("gc_steal", "softmax", "stealing the reference through gc", "reject", ("correctness",)),
    Case("bias_deep", "deep_residual", "systematic +5e-4 bias at depth 32", "reject", ("model",)),
    Case("tanh_gelu", "gelu", "tanh-approximate GELU", "reject", ("model",)),
    Case("side_stream", "swish_bias", "side-stream launch", "reject", ("performance",), GPU),
    Case("mutate_input", "swish_bias", "in-place input mutation", "reject", ("correctness",)),
    Case("hardcoded_shape", "softmax", "hard-coded shapes", "reject", ("correctness",)),
    Case("tf32_matmul", "matmul", "TF32 matmul", "reject", ("correctness", "model"), GPU),
    _timed_on_cpu("timer_patch", "timer monkey-patching"),
    _timed_on_cpu("backend_flags", "TF32 / cudnn.benchmark switched on at import"),
    # --- kernels that behave differently while timed: every timed call is checked -------
    Case(
        "lazy_output", "swish_bias", "deferred output (tensor subclass)", "reject", ("correctness",)
    ),
    _timed_on_cpu("late_cheat", "exact for the first calls, then skips the work"),
    _timed_on_cpu(
        "mode_lazy", "unwritten output while timed; a dispatch mode left on computes it when read"
    ),
    _timed_on_cpu(
        "library_lazy",
        "unwritten output while timed; a kernel it registers for an ATen op computes it when read",
    ),
    _timed_on_cpu("stack_sniff", "recognises the timing loop on the call stack"),
    _timed_on_cpu(
        "ring_output", "outputs written into a ring of two buffers (call n+2 overwrites n)"
    ),
    Case(
        "fork_async",
        "swish_bias",
        "output written later on torch's inter-op pool (torch.jit.fork)",
        "reject",
        ("correctness",),
    ),
    _timed_on_cpu("event_hook", "hooks torch.cuda.Event to learn it is timed"),
    _timed_on_cpu("poison_sniff", "honest only when fresh memory is poisoned"),
    Case(
        "id_memo",
        "swish_bias",
        "memo keyed on the input tensor object",
        "reject",
        ("correctness", "performance"),
        perf_on_cpu=True,
    ),
    Case(
        "version_memo",
        "swish_bias",
        "memo keyed on tensor and version",
        "no_win",
        ("correctness", "performance"),
        GPU,
    ),
    Case(
        "value_memo",
        "matmul",
        "memo keyed on a few sampled input values",
        "reject",
        ("performance",),
        GPU,
    ),
    Case(
        "prefetch_memo",
        "matmul",
        "memo of every input set its process holds, found by a gc walk at its first call",
        "reject",
        ("performance",),
        GPU,
    ),
    Case(
        "files_memo",
        "matmul",
        "memo of every input file its job names, read at import",
        "reject",
        ("performance",),
        GPU,
    ),
    # --- classes of our own ----------------------------------------------------------------
    _timed_on_cpu("thread_after_return", "output written by a thread after forward returns"),
    _timed_on_cpu("job_sniff", "reads the harness's job file to learn it is timed"),
    _timed_on_cpu("forged_ask", "writes a first-sight request mark of its own"),
    _timed_on_cpu(
        "restored_records", "replaces the recorder in each timed call; it restores itself"
    ),
    Case(
        "patched_records",
        "swish_bias",
        "replaces the timing child's recorder of timed calls (caught in either child)",
        "reject",
        ("correctness", "performance"),
        perf_on_cpu=True,
    ),
    Case(
        "patched_checks",
        "swish_bias",
        "switches off gate 2's in-process mutation and aliasing checks",
        "reject",
        ("correctness",),
    ),
    Case(
        "subclass_output",
        "swish_bias",
        "an output the parent cannot read back (a tensor subclass)",
        "reject",
        ("correctness",),
    ),
    Case(
        "range_clamp",
        "swish_bias",
        "correct only on the value range get_inputs() draws",
        "reject",
        ("correctness",),
    ),
    Case(
        "timed_tanh",
        "gelu",
        "tells timing from checking (gc.freeze) and is less exact while timed",
        "reject",
        ("model", "performance"),  # a forked gate-3 child on the GPU looks timed to it too
        perf_on_cpu=True,
    ),
    Case(
        "stale_graph",
        "swish_bias",
        "CUDA graph replayed from a stale capture",
        "reject",
        ("performance",),
        GPU,
    ),
    Case(
        "patched_compare",
        "swish_bias",
        "torch comparison functions patched to agree",
        "reject",
        ("correctness",),
    ),
    Case("output_alias", "scale_one", "output aliases the input", "reject", ("correctness",)),
    Case(
        "lowprec_long_rows",
        "softmax",
        "bfloat16 only in long reductions",
        "reject",
        ("correctness", "model"),
    ),
    Case(
        "hardcoded_batch",
        "row_sums",
        "batch size hard-coded, no get_holdout_inputs",
        "reject",
        ("static", "correctness"),
    ),
    _timed_on_cpu(
        "baseline_leftovers",
        "reading what the baseline left in the shared timing process (none: it is honest)",
        "accept",
        gpu_expect="no_win",  # its honest eager path is slower than the compiled baseline
    ),
    _timed_on_cpu(
        "dispatch_memo",
        "a memo that hits only in back-to-back host batches, hiding a slow dispatch",
        "accept",
        gpu_expect="reject",  # its honest eager path is slower than the compiled baseline
    ),
    # --- broken candidates: a verdict, never a crash of ours ----------------------------
    Case("syntax_error", "swish_bias", "syntax error", "reject", ("static",)),
    Case("raises", "swish_bias", "exception at first call", "reject", ("static",)),
    Case("segfault", "swish_bias", "process crash (SIGSEGV)", "reject", ("static",)),
    Case("hang", "swish_bias", "hang (timeout)", "reject", ("static",), timeout_s=20.0),
    Case("illegal_access", "swish_bias", "illegal memory access", "reject", ("static",), GPU),
    # --- honest candidates: accepted (on the CPU: gates 1-3, no timing) -----------------
    # its GPU work is 70x the baseline's; its wall time rests on the host clock, whose
    # regimes read 37-70x on the H200 (docs/TEAM_NOTES.md, thirty-fourth session)
    Case("diag_rowscale", "diag_matmul", "honest", "accept", min_speedup=30.0),
    Case("swish_fused", "swish_bias", "honest", "accept"),
    Case("gelu_erf", "gelu", "honest", "accept"),
    Case("softmax_rows", "softmax", "honest", "accept"),
    Case("deep_fused", "deep_residual", "honest", "accept"),
    Case("tiny_scale_honest", "tiny_scale", "honest", "accept"),
)


def cases_for(device: str) -> list[Case]:
    kind = "cuda" if device.startswith("cuda") else "cpu"
    return [c for c in CASES if kind in c.devices]


def candidate_path(case: Case, scratch: Path) -> Path:
    if case.candidate == "syntax_error":
        path = scratch / "syntax_error.py"
        path.write_text(SYNTAX_ERROR_SOURCE)
        return path
    return CANDIDATES / f"{case.candidate}.py"


@dataclass
class CaseOutcome:
    case: Case
    result: CascadeResult
    on_gpu: bool = False

    @property
    def expect(self) -> str:
        return (self.on_gpu and self.case.gpu_expect) or self.case.expect

    @property
    def verdict(self) -> str:
        r = self.result
        if r.could_not_run:
            return "could-not-run"
        if r.accepted:
            return f"accepted ({r.category.value})" if r.category else "accepted (gates 1-3)"
        last = r.verdicts[-1] if r.verdicts else None
        return f"rejected ({last.status.value})" if last else "rejected"

    @property
    def as_expected(self) -> bool:
        r = self.result
        if r.could_not_run:
            return False
        if self.expect == "accept":
            if not r.accepted:
                return False
            if self.case.min_speedup is not None and r.speedup is not None:
                return r.speedup >= self.case.min_speedup
            return True
        if self.expect == "no_win" and r.accepted:
            if r.category is None or r.category.value != "optimized":
                return True
            # A launch-bound forward is honestly faster by dispatch alone; a cheat's
            # gain (a memo hit skips the kernel) shows in the GPU work, which must not
            # drop by more than noise.
            gpu = r.verdicts[-1].metrics.get("gpu_work", {}).get("speedup")
            return gpu is not None and gpu < NO_WIN_GPU_WORK_MAX
        gate = r.deciding_gate.value if r.deciding_gate else None
        return (not r.accepted) and (not self.case.gates or gate in self.case.gates)

    def numbers(self) -> str:
        """The deciding gate's key numbers, for the table."""
        r = self.result
        parts: list[str] = []
        for v in r.verdicts:
            m = v.metrics
            if v.gate.value == "correctness" and not v.passed:
                calls = [c for c in m.get("calls", []) if not c.get("ok")]
                if calls:
                    c = calls[0]
                    parts.append(
                        f"{c['set']}: err {c['max_abs_err']:.3g} rel {c['max_scale_err']:.3g}"
                        + (f" unwritten {c['unwritten']}" if c["unwritten"] else "")
                        + (f" mutated {c['mutated_inputs']}" if c["mutated_inputs"] else "")
                        + (" stale" if c["stale_output"] else "")
                    )
            if v.gate.value == "model":
                if m.get("max_rho") is not None:
                    parts.append(f"rho {m['max_rho']:.3g}")
                if m.get("max_d_ref") is not None:
                    parts.append(f"d_ref {m['max_d_ref']:.2g} d_opt {m['max_d_opt']:.2g}")
            if v.gate.value == "performance":
                b = m.get("baseline", {}).get("median_ms")
                c = m.get("candidate", {}).get("median_ms")
                if b is not None and c is not None:
                    parts.append(f"{b:.4g}->{c:.4g} ms ({b / c:.3g}x)")
                host = m.get("candidate", {}).get("host_median_ms")
                if host is not None and v.status.value != "pass":
                    parts.append(f"host {host:.4g} ms")
                roof = m.get("roofline", {})
                if roof.get("floor_ms") is not None:
                    parts.append(f"floor {roof['floor_ms']:.3g} ms")
                if m.get("tampered"):
                    parts.append("tampered " + ",".join(m["tampered"][:3]))
        return "; ".join(parts)

    def row(self) -> dict[str, Any]:
        r = self.result
        return {
            "candidate": self.case.candidate,
            "problem": self.case.problem,
            "class": self.case.cheat,
            "expected": self.expect,
            "verdict": self.verdict,
            "deciding_gate": r.deciding_gate.value if r.deciding_gate else "-",
            "as_expected": self.as_expected,
            "numbers": self.numbers(),
            "reason": r.reason[:240],
            "speedup": r.speedup,
            "gpu_seconds": round(r.gpu_seconds, 2),
            "wall_seconds": round(r.wall_seconds, 2),
            "rounds": self.rounds(),
            # where the verdict's seconds went (issue 22's cost, per stage and child phase)
            "stages": r.environment.get("stage_seconds", {}),
        }

    def rounds(self) -> dict[str, Any]:
        """Gate 4's rounds one by one: a median that moved between runs is read from these."""
        perf = [v.metrics for v in self.result.verdicts if v.gate.value == "performance"]
        if not perf:
            return {}
        m = perf[-1]
        return {
            side: [round(x["primary_ms"], 5) for x in m.get(side, {}).get("rounds", [])]
            for side in ("baseline", "candidate")
        } | {
            key: m[key]
            for key in ("prestarted", "quiet_gpu_waits_s", "order_control", "other_work")
            if key in m
        }

    def explain(self) -> str:
        """The row and every gate's status and reason as one string: pytest prints a string
        message whole, but cuts a dict's repr short (a failed case must say why)."""
        gates = "\n".join(
            f"  {v.gate.value}: {v.status.value}: {v.reason}" for v in self.result.verdicts
        )
        return json.dumps(self.row(), default=str) + "\n" + gates


@dataclass
class SuiteResult:
    device: str
    outcomes: list[CaseOutcome]
    phases: dict[str, float] = field(default_factory=dict)
    references: dict[str, float] = field(default_factory=dict)

    def by_candidate(self) -> dict[str, CaseOutcome]:
        return {o.case.candidate: o for o in self.outcomes}

    def median_full_verdict_seconds(self) -> float | None:
        """Median device-seconds of verdicts that went through all four gates."""
        full = [o.result.gpu_seconds for o in self.outcomes if len(o.result.verdicts) == 4]
        return statistics.median(full) if full else None

    def to_json(self) -> dict[str, Any]:
        return {
            "device": self.device,
            "phases_s": self.phases,
            "reference_seconds": self.references,
            "median_full_verdict_gpu_seconds": self.median_full_verdict_seconds(),
            "median_verdict_gpu_seconds": statistics.median(
                [o.result.gpu_seconds for o in self.outcomes]
            )
            if self.outcomes
            else None,
            "rows": [o.row() for o in self.outcomes],
            "results": [json.loads(o.result.model_dump_json()) for o in self.outcomes],
        }


def cpu_suite_settings() -> GateSettings:
    """The CPU suite's gates: the Triton interpreter, an eager baseline, one short round."""
    return GateSettings(
        device="cpu",
        baseline_mode="eager",
        warmup_ms=2.0,
        rep_ms=10.0,
        min_rounds=1,
        max_rounds=1,
        static_timeout_s=120.0,
        timing_timeout_s=120.0,
    )


def _settings_for(case: Case, base: GateSettings) -> GateSettings:
    update: dict[str, Any] = {}
    if case.timeout_s is not None:
        update["static_timeout_s"] = case.timeout_s
    return base.model_copy(update=update) if update else base


def warm_baseline(
    problem: Path, bundle: ReferenceBundle, settings: GateSettings, scratch: Path
) -> None:
    """Compile the baseline once so the timed rounds hit Inductor's caches.

    With the GPU to itself: max-autotune times its choices, and a choice made beside
    other cases' gates stays in the cache for every round (a slowed baseline).
    """
    job = TimingJob(
        side="baseline",
        model=baseline_source(str(problem), settings),
        device=settings.device,
        model_seed=settings.model_seed,
        inputs_dir=str(bundle.inputs_dir),
        input_set=bundle.input_sets[0].name,
        warmup_ms=1.0,
        rep_ms=1.0,
        host_batches=1,
    )
    with gpu_section("exclusive", settings.device):
        run_job(
            job,
            scratch / f"warm-{problem.stem}",
            timeout_s=settings.timing_timeout_s,
            device=settings.device,
        )


def scratch_dir(prefix: str) -> Path:
    """A scratch directory in RAM when there is room (gate children move GBs of tensors)."""
    import shutil
    import tempfile

    shm = Path("/dev/shm")
    if shm.is_dir() and shutil.disk_usage(shm).free > 24 * 2**30:
        return Path(tempfile.mkdtemp(prefix=prefix, dir=shm))
    return Path(tempfile.mkdtemp(prefix=prefix))


def select_cases(cases: list[Case], names: str | None) -> list[Case]:
    """``names``: comma-separated candidate names (empty: all)."""
    if not names:
        return cases
    wanted = {n.strip() for n in names.split(",") if n.strip()}
    return [c for c in cases if c.candidate in wanted]


def _print(line: str) -> None:
    print(f"[gates {time.strftime('%H:%M:%S')}] {line}", flush=True)


def _not_run(case: Case, settings: GateSettings, why: str) -> CascadeResult:
    return CascadeResult(
        problem=str(PROBLEMS / f"{case.problem}.py"),
        candidate=case.candidate,
        verdicts=[],
        accepted=False,
        could_not_run=True,
        reason=why,
        settings=settings,
    )


def run_suite(
    settings: GateSettings,
    workdir: Path,
    cases: list[Case] | None = None,
    *,
    parallel: int = 4,
    perf: bool = True,
    deadline: float | None = None,
    progress: Callable[[str], None] | None = _print,
    on_row: Callable[[dict[str, Any]], None] | None = None,
) -> SuiteResult:
    """Check every case: references and gates 1-3 in parallel, gate 4 serially.

    ``deadline`` (epoch seconds) bounds every phase: work not started by then is
    reported as not run instead of overrunning a shared device budget.
    ``progress`` gets a line per finished step; ``on_row`` each final row.
    """
    say = progress or (lambda _line: None)
    cases = cases if cases is not None else cases_for(settings.device)
    on_gpu = settings.device.startswith("cuda")
    late = (lambda: time.time() > deadline) if deadline is not None else (lambda: False)
    phases: dict[str, float] = {}
    t0 = time.monotonic()
    problems = sorted({c.problem for c in cases})

    def reference(p: str) -> ReferenceBundle:
        b = prepare_reference(PROBLEMS / f"{p}.py", settings, workdir / f"ref-{p}")
        say(f"reference {p}: {b.outcome.describe()} in {b.outcome.wall_s:.1f} s")
        return b

    with ThreadPoolExecutor(parallel) as pool:
        bundles = dict(zip(problems, pool.map(reference, problems), strict=True))
    phases["references"] = time.monotonic() - t0
    say(f"references done in {phases['references']:.1f} s")
    t1 = time.monotonic()

    def check(case: Case) -> CascadeResult:
        if late():
            return _not_run(case, settings, "not run: device-time deadline reached")
        path = candidate_path(case, workdir)
        r = check_candidate(bundles[case.problem], path, _settings_for(case, settings), workdir)
        gate = r.deciding_gate.value if r.deciding_gate else "-"
        say(
            f"checked {case.candidate}: gates 1-3 {'pass' if not r.deciding_gate else 'stop at ' + gate} ({r.wall_seconds:.1f} s)"
        )
        return r

    def warm(p: str) -> None:
        started = time.monotonic()
        warm_baseline(PROBLEMS / f"{p}.py", bundles[p], settings, workdir)
        say(f"baseline {p} compiled/warm in {time.monotonic() - started:.1f} s")

    timed_problems = sorted({c.problem for c in cases if on_gpu or c.perf_on_cpu}) if perf else []
    with ThreadPoolExecutor(parallel) as pool, ThreadPoolExecutor(3) as warmers:
        warming = [warmers.submit(warm, p) for p in timed_problems if bundles[p].ok]
        checked = list(pool.map(check, cases))
        for w in warming:
            w.result()
    phases["gates_1_to_3"] = time.monotonic() - t1
    say(f"gates 1-3 done in {phases['gates_1_to_3']:.1f} s")
    t2 = time.monotonic()
    outcomes = []
    skipped: list[str] = []
    for case, result in zip(cases, checked, strict=True):
        wants_perf = perf and (on_gpu or case.perf_on_cpu)
        if wants_perf and result.verdicts and all(v.passed for v in result.verdicts):
            if late():
                skipped.append(case.candidate)  # device time is shared: report, do not overrun
            else:
                result = time_candidate(result, bundles[case.problem], settings, workdir)
                last = result.verdicts[-1]
                say(f"timed {case.candidate}: {last.status.value}: {last.reason[:140]}")
        outcome = CaseOutcome(case, result, on_gpu)
        outcomes.append(outcome)
        if on_row is not None:
            on_row(outcome.row())
    if skipped:
        phases["timing_skipped_for"] = float(len(skipped))
        say(f"timing skipped (deadline) for {skipped}")
    phases["gate_4"] = time.monotonic() - t2
    return SuiteResult(
        device=settings.device,
        outcomes=outcomes,
        phases={k: round(v, 2) for k, v in phases.items()},
        references={p: round(b.outcome.wall_s, 2) for p, b in bundles.items()},
    )


def format_table(suite: SuiteResult) -> str:
    """A plain-text table of the suite (what the GPU script prints)."""
    rows = [o.row() for o in suite.outcomes]
    cols = [
        "candidate",
        "class",
        "expected",
        "verdict",
        "deciding_gate",
        "as_expected",
        "numbers",
        "gpu_seconds",
    ]
    widths = {c: max(len(c), *(len(str(r[c])) for r in rows)) for c in cols}
    widths["numbers"] = min(widths["numbers"], 70)
    line = " | ".join(c.ljust(widths[c]) for c in cols)
    out = [line, "-" * len(line)]
    for r in rows:
        out.append(" | ".join(str(r[c])[: widths[c]].ljust(widths[c]) for c in cols))
    return "\n".join(out)


def as_dict(case: Case) -> dict[str, Any]:
    return asdict(case)
