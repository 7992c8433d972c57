"""``kernelopt verify PROBLEM.py --candidate CANDIDATE.py [--json]``: the cascade, no server.

Exit codes: 0 accepted, 1 rejected (a verdict), 2 could not run (the problem
or reference is broken, no GPU, or the baseline could not be timed).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from kernelopt.contracts.verdicts import CascadeResult, GateSettings, GateStatus, GateVerdict

if TYPE_CHECKING:
    from collections.abc import Callable

    from rich.table import Table

    # waits for the files' CPU check: what it could not check there, or ``ProblemError``
    Checked = Callable[[], str]

# ``--device cpu``: gate 4 runs its checked loop once per side (a few calls under the
# Triton interpreter, outputs compared) and makes no speed claim
CPU_TIMING: dict[str, Any] = {
    "baseline_mode": "eager",
    "warmup_ms": 2.0,
    "rep_ms": 10.0,
    "min_rounds": 1,
    "max_rounds": 1,
}

NO_GPU = (
    "no CUDA GPU here: verification times kernels on the GPU. Use --device cpu to check "
    "on the CPU (the Triton interpreter; no speed verdict)."
)


def cuda_only(problem_path: str | Path) -> str:
    """Why ``--device cpu`` cannot check a problem that makes CUDA tensors itself."""
    return (
        f"{problem_path} builds its model or inputs on CUDA (.cuda(), device='cuda'), so it "
        "cannot be checked on the CPU: verify it on a GPU host (--device cuda)"
    )


_STYLE = {
    GateStatus.PASS: "green",
    GateStatus.FAIL: "red",
    GateStatus.ERROR: "red",
    GateStatus.QUARANTINE: "yellow",
}


def _cuda_available() -> bool:
    try:
        import torch

        return torch.cuda.is_available()
    except ImportError:
        return False


def _numbers(v: GateVerdict) -> str:
    """The few numbers a human wants per gate (everything else is in --json)."""
    m: dict[str, Any] = v.metrics
    if v.gate.value == "static":
        dry = m.get("dry_run_seconds")
        return f"dry run {dry:.2f} s" if dry is not None else ""
    if v.gate.value == "correctness":
        calls = m.get("calls", [])
        err = m.get("max_abs_err")
        scale = m.get("max_scale_err")
        if err is None:
            return f"{len(calls)} calls"
        return f"{len(calls)} calls, max err {err:.3g}, rel {scale:.3g}"
    if v.gate.value == "model":
        rho, d_ref, d_opt = m.get("max_rho"), m.get("max_d_ref"), m.get("max_d_opt")
        parts = []
        if rho is not None:
            parts.append(f"rho {rho:.3g}")
        if d_ref is not None:
            parts.append(f"d_ref {d_ref:.3g}")
        if d_opt is not None:
            parts.append(f"d_opt {d_opt:.3g}")
        return ", ".join(parts)
    if v.gate.value == "performance":
        base = m.get("baseline", {}).get("median_ms")
        cand = m.get("candidate", {}).get("median_ms")
        if base is None or cand is None:
            return ""
        rounds = len(m.get("candidate", {}).get("rounds", []))
        dec = m.get("decision", {})
        noise = dec.get("noise")
        text = f"{base:.4g} -> {cand:.4g} ms ({base / cand:.3g}x), {rounds} rounds"
        return text + (f", noise {noise:.1%}" if noise is not None else "")
    return ""


def verdict_table(result: CascadeResult, width: int) -> Table:
    """One row per gate.  Below 100 columns the numbers go under the reason and the
    device seconds only into the total, so no cell is squeezed into broken words."""
    from rich.table import Table

    wide = width >= 100
    table = Table(show_lines=not wide)
    table.add_column("gate", no_wrap=True)
    table.add_column("status", no_wrap=True)
    if wide:
        table.add_column("numbers", overflow="fold")
    table.add_column("reason", overflow="fold", ratio=1)
    if wide:
        table.add_column("device s", no_wrap=True, justify="right")
    for v in result.verdicts:
        style = _STYLE.get(v.status, "")
        status = f"[{style}]{v.status.value}[/]"
        numbers = _numbers(v)
        if wide:
            table.add_row(v.gate.value, status, numbers, v.reason, f"{v.gpu_seconds:.1f}")
        else:
            reason = f"{v.reason}\n[dim]{numbers}[/]" if numbers else v.reason
            table.add_row(v.gate.value, status, reason)
    return table


def feedback_summary(feedback: str) -> str:
    """The feedback's first paragraph: what failed and where, without the traceback."""
    head = feedback.strip().split("\n\n", 1)[0]
    return "\n".join(line for line in head.splitlines() if not line.startswith("  File "))


def render(result: CascadeResult, verbose: bool = False) -> None:
    from rich.console import Console

    console = Console()
    console.print(f"problem:   {result.problem}")
    console.print(f"candidate: {result.candidate}")
    env = result.environment
    if env:
        from kernelopt.kinds.registry import kind_of_file

        # a kernel problem's baseline is its own launcher (kernelopt.kinds)
        kind = kind_of_file(result.problem)
        baseline = kind.baseline_label(result.settings.baseline_mode, quote="")
        console.print(
            f"device: {env.get('device')}  torch {env.get('torch')}  triton {env.get('triton')}  "
            f"baseline: {baseline}"
        )
        for key, label in (  # how the check was made: policy, sizes, held-out shapes, gate 4
            ("evaluation", "evaluation"),
            ("estimate", "estimate"),
            ("held_out_shapes", "held-out shapes"),
            ("widened_values", "widened values"),
            ("gate_4", "gate 4"),
        ):
            if env.get(key):
                console.print(f"{label}: {env[key]}", highlight=False)
    console.print(verdict_table(result, console.width))
    if result.could_not_run:
        console.print(f"[bold red]COULD NOT RUN[/]: {result.reason}")
    elif result.accepted:
        cat = result.category.value if result.category else "gates 1-3 only"
        speed = f" {result.speedup:.3g}x" if result.speedup else ""
        if result.speedup and result.speedup_interval:
            low, high = result.speedup_interval
            speed += f", {low:.3g}x-{high:.3g}x over the timing rounds"
        console.print(f"[bold green]ACCEPTED[/] ({cat}{speed})")
    else:
        gate = result.deciding_gate.value if result.deciding_gate else "?"
        console.print(f"[bold red]REJECTED[/] at {gate}: {result.reason}")
    if result.feedback:
        console.print("\n[bold]Feedback for the kernel author:[/]")
        summary = result.feedback if verbose else feedback_summary(result.feedback)
        console.print(summary, markup=False, highlight=False)
        if summary.strip() != result.feedback.strip():
            console.print("(the full feedback and traceback: -v, or --json)", style="dim")
    console.print(
        f"\n{result.gpu_seconds:.1f} device-seconds, {result.wall_seconds:.1f} s wall",
        highlight=False,
    )


def verify_command(
    problem_path: str | Path,
    candidate_path: str | Path,
    json_out: bool = False,
    *,
    device: str = "auto",
    baseline_mode: str | None = None,
    run_perf: bool = True,
    settings: GateSettings | None = None,
    verbose: bool = False,
) -> int:
    """Run the cascade and print a table (or JSON).  Returns the exit code."""
    from kernelopt.errors import ProblemError
    from kernelopt.file_checks import check_candidate_file, require_file
    from kernelopt.kinds.registry import check_problem_file

    try:
        check_problem_file(require_file(problem_path, "problem"))
    except ProblemError as exc:
        _fail(json_out, problem_path, candidate_path, f"bad problem file: {exc}")
        return 2
    try:
        check_candidate_file(candidate_path)
    except ProblemError as exc:
        _fail(json_out, problem_path, candidate_path, f"bad candidate: {exc}")
        return 2
    # import and build both once on the CPU, time-limited, before any gate runs; the check
    # runs while this process loads torch and the gates and the zygote starts
    checked_files = _check_soon(problem_path, candidate_path)
    gate_settings = _settings_for(settings or GateSettings(), device, baseline_mode, run_perf)
    if gate_settings is None:
        return _checked_stop(checked_files, None, json_out, problem_path, candidate_path) or 2
    device = gate_settings.device
    import contextlib
    import tempfile

    from gates.background_zygote import fast_launch_soon
    from gates.cascade import verify_candidate
    from kernelopt.kinds.candidates import forward_candidate_file

    # On a GPU every gate child forks from one preloaded zygote (~10 s saved per child); it
    # loads while the reference (a spawned child) is prepared.
    launcher = fast_launch_soon(device) if device.startswith("cuda") else contextlib.nullcontext()
    from rich.console import Console

    from kernelopt.cli.verify_progress import ProgressWatcher

    progress = Console(stderr=True)
    gates = "gates 1-4" if gate_settings.run_perf else "gates 1-3"
    if device == "cpu" and gate_settings.run_perf:
        gates += " (gate 4 checks the timed calls, no speed verdict on the CPU)"
    progress.print(
        f"verifying on {device}: the reference, then {gates}; one line per step of each "
        "checking process"
        + (" (the Triton interpreter on the CPU takes minutes)" if device == "cpu" else ""),
        style="dim",
        highlight=False,
    )
    with tempfile.TemporaryDirectory(prefix="kernelopt-candidate-") as tmp, launcher as ready:
        if stop := _checked_stop(checked_files, device, json_out, problem_path, candidate_path):
            return stop
        # hook: a launch-only candidate (kernel problems) is checked in its ModelNew form
        checked = forward_candidate_file(candidate_path, Path(tmp))
        workdir = Path(tmp) / "gates"
        with ProgressWatcher(workdir, progress):
            result = verify_candidate(
                problem_path, checked, gate_settings, workdir=workdir, before_gates=ready
            )
    if checked != Path(candidate_path):
        result = result.model_copy(update={"candidate": str(Path(candidate_path).resolve())})
    if json_out:
        print(result.model_dump_json(indent=2))
    else:
        render(result, verbose=verbose)
    return result.exit_code


def expand_candidates(paths: list[Path]) -> list[Path]:
    """Files as given, folders as their ``*.py`` files in name order (no recursion)."""
    out: list[Path] = []
    for path in paths:
        if path.is_dir():
            out.extend(sorted(p for p in path.glob("*.py") if p.is_file()))
        else:
            out.append(path)
    return out


def verify_many_command(
    problem_path: Path,
    candidates: list[Path],
    json_out: bool = False,
    *,
    device: str = "auto",
    baseline_mode: str | None = None,
    run_perf: bool = True,
) -> int:
    """Several candidates (files or folders) against one shared reference (``verify_batch``)."""
    from kernelopt.errors import ProblemError
    from kernelopt.file_checks import require_file
    from kernelopt.kinds.registry import check_problem_file

    files = expand_candidates(candidates)
    if not files:
        _fail(json_out, problem_path, candidates[0], "no candidate .py files found")
        return 2
    try:
        check_problem_file(require_file(problem_path, "problem"))
    except ProblemError as exc:
        _fail(json_out, problem_path, candidates[0], f"bad problem file: {exc}")
        return 2
    # the problem's check runs while this process loads torch and the gates and the
    # zygote starts; the candidates' own checks run beside the reference
    bad = "bad problem file"
    checked_problem = _check_soon(problem_path)
    from kernelopt.cli.verify_batch import verify_batch_command

    settings = _settings_for(GateSettings(), device, baseline_mode, run_perf)
    if settings is None:
        return _checked_stop(checked_problem, None, json_out, problem_path, candidates[0], bad) or 2

    def problem_ready() -> int | None:
        device = settings.device
        return _checked_stop(checked_problem, device, json_out, problem_path, candidates[0], bad)

    return verify_batch_command(Path(problem_path), files, json_out, settings, problem_ready)


def _check_soon(problem_path: str | Path, candidate_path: str | Path | None = None) -> Checked:
    """Start the files' CPU check (``preflight``, a child process) and return the wait for
    it, so that its seconds overlap this process's imports and the zygote's start.  The
    wait returns what could not be checked on the CPU, or raises ``ProblemError``."""
    from concurrent.futures import ThreadPoolExecutor

    from kernelopt.preflight_problem import preflight

    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="preflight")
    if candidate_path is None:
        future = pool.submit(preflight, problem_path)
    else:  # the candidate is imported: untrusted code, only in the sandbox
        from gates.sandbox import confine_preflight

        future = pool.submit(preflight, problem_path, candidate_path, confine=confine_preflight)
    pool.shutdown(wait=False)
    return future.result


def _checked_stop(
    checked: Checked,
    device: str | None,
    json_out: bool,
    problem_path: str | Path,
    candidate_path: str | Path,
    what: str = "bad input",
) -> int | None:
    """Exit code 2, after saying why, when the files' check failed, there is no GPU
    (``device`` None: a bad file is named first) or a CPU run meets a problem that makes
    CUDA tensors; None to go on."""
    from kernelopt.errors import ProblemError

    try:
        unchecked = checked()
    except ProblemError as exc:
        _fail(json_out, problem_path, candidate_path, f"{what}: {exc}")
        return 2
    if device is None:
        reason = NO_GPU
    elif unchecked and device == "cpu":
        reason = cuda_only(problem_path)
    else:
        return None
    _fail(json_out, problem_path, candidate_path, reason)
    return 2


def _settings_for(
    base: GateSettings, device: str, baseline_mode: str | None, run_perf: bool
) -> GateSettings | None:
    """The gate settings for the command's flags; None when ``auto`` finds no GPU."""
    if device == "auto":
        if not _cuda_available():
            return None
        device = "cuda"
    update: dict[str, Any] = {"device": device}
    if baseline_mode:
        update["baseline_mode"] = baseline_mode
    if not run_perf:
        update["run_perf"] = False
    elif device == "cpu":
        update.update(CPU_TIMING)
    return base.model_copy(update=update)


def _fail(json_out: bool, problem: str | Path, candidate: str | Path, reason: str) -> None:
    result = CascadeResult(
        problem=str(problem),
        candidate=str(candidate),
        verdicts=[],
        accepted=False,
        could_not_run=True,
        reason=reason,
    )
    if json_out:
        print(result.model_dump_json(indent=2))
    else:
        from rich.console import Console

        Console(stderr=True).print(f"[bold red]COULD NOT RUN[/]: {reason}")
