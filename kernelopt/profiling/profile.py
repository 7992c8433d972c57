"""The profiler agent's body: harness -> ncu (or event timing) -> distilled profile -> analysis.

Entry point for the supervised child of the ``profile`` activity:
``profile_target(inp, store) -> ProfileResult``.  It never raises for a
profiling problem: no harness, no ncu, no counter permission or a crashing
harness all end in a profile whose ``source`` says what we have ("ncu",
"events" or "none") and whose ``note`` says why.
"""

from __future__ import annotations

import json
import subprocess
import tempfile
import time
from pathlib import Path

from kernelopt.checkpoint import report
from kernelopt.contracts.search import KernelProfile, ProfileInput, ProfileResult
from kernelopt.errors import InfrastructureError
from kernelopt.profiling.analyst import classify
from kernelopt.profiling.distill import distill
from kernelopt.profiling.dominant import profiled_kernel
from kernelopt.profiling.harness_files import candidate_harnesses
from kernelopt.profiling.harness_runner import RESULT_PREFIX, runner_command
from kernelopt.profiling.ncu import find_ncu, run_ncu, sandboxed
from kernelopt.store import ArtifactStore

EVENTS_TIMEOUT_S = 300.0


def run_events(
    harness: Path,
    reps: int = 50,
    timeout_s: float = EVENTS_TIMEOUT_S,
    store_root: Path | None = None,
) -> dict:
    """Event timing of the harness in a fresh sandboxed process (it imports candidate code):
    {"median_ms": ...} or {"error": ...}."""
    try:
        cmd, env = sandboxed(
            runner_command(harness, "events", "--reps", str(reps)),
            harness,
            harness.parent,
            store_root,
        )
    except InfrastructureError as exc:
        return {"error": f"harness not run: {exc}"}
    try:
        proc = subprocess.run(
            cmd, capture_output=True, text=True, timeout=timeout_s, check=False, env=env
        )
    except subprocess.TimeoutExpired:
        return {"error": f"harness timed out after {timeout_s:.0f} s"}
    for line in proc.stdout.splitlines():
        if line.startswith(RESULT_PREFIX):
            return json.loads(line[len(RESULT_PREFIX) :])
    lines = [line.strip() for line in proc.stderr.splitlines() if line.strip()]
    last = lines[-1] if lines else "no output"
    return {"error": f"harness failed (exit {proc.returncode}): {last[:300]}"}


def profile_target(inp: ProfileInput, store: ArtifactStore) -> ProfileResult:
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="kernelopt-profile-") as tmp:
        workdir = Path(tmp)
        found, missing = candidate_harnesses(inp, store, workdir / "harness")
        profile = _profile(inp, store, found, missing, workdir)
    kernel, why = profiled_kernel(inp.target, inp.kernel_times)
    if profile.source != "none" and kernel:
        profile = profile.model_copy(update={"kernel": kernel, "kernel_note": why})
    return ProfileResult(
        profile=profile,
        analysis=classify(profile),
        gpu_seconds=time.monotonic() - started,
        hardware=_hardware(),
    )


def _hardware():
    """The device's facts for the prompts; a diagnostic, so any failure is just None."""
    from kernelopt.profiling.hardware import device_hardware

    try:
        return device_hardware()
    except (RuntimeError, AssertionError, ImportError):
        return None


def _store_root(store: ArtifactStore) -> Path | None:
    """The local store's directory (the sandbox shows the harness only its own blobs)."""
    root = getattr(getattr(store, "backend", None), "root", None)
    return Path(root) if root is not None else None


def _first_working(
    found: list[tuple[Path, str]], notes: list[str], store_root: Path | None = None
) -> tuple[Path, str, dict] | None:
    """The first harness that runs (event timing doubles as the check), noting the failures."""
    for path, how in found:
        report({"step": "events", "harness": how})
        timed = run_events(path, store_root=store_root)
        if "error" not in timed:
            return path, how, timed
        notes.append(f"{how} harness: {timed['error']}")
    return None


def _profile(
    inp: ProfileInput,
    store: ArtifactStore,
    found: list[tuple[Path, str]],
    missing: list[str],
    workdir: Path,
) -> KernelProfile:
    notes = [f"no {m}" if m.startswith("kernelopt") else m for m in missing] if not found else []
    chosen = _first_working(found, notes, _store_root(store))
    if chosen is None:
        return KernelProfile(source="none", note="; ".join(notes) or "no harness")
    harness, how, timed = chosen
    events = KernelProfile(
        source="events",
        duration_us=float(timed["median_ms"]) * 1000.0,
        registers_per_thread=timed.get("registers"),
        spills=timed.get("spills"),
        note=f"{how} harness",
    )
    ncu = find_ncu() if inp.use_ncu else None
    if not inp.use_ncu:
        notes.append("ncu disabled for this search")
    elif ncu is None:
        notes.append("ncu not found")
    else:
        report({"step": "ncu", "harness": how})
        run = run_ncu(
            harness, workdir, _kernel_regex(inp, store), inp.timeout_s, ncu, _store_root(store)
        )
        if run.ok and run.report is not None:
            d = distill(run.details_csv, run.details_text, run.raw_csv)
            if d.sol_compute_pct is not None or d.duration_us is not None:
                raw = store.put_file(run.report, media_type="application/x-ncu-rep")
                return KernelProfile(
                    source="ncu",
                    duration_us=d.duration_us,
                    sol_compute_pct=d.sol_compute_pct,
                    sol_memory_pct=d.sol_memory_pct,
                    registers_per_thread=d.registers_per_thread or events.registers_per_thread,
                    spills=d.spills if d.spills is not None else events.spills,
                    achieved_occupancy_pct=d.achieved_occupancy_pct,
                    top_rules=d.top_rules(3),
                    raw_report=raw,
                    note=f"{how} harness; ncu {run.seconds:.0f} s on {d.kernel_name or 'first kernel'}; "
                    f"events median {events.duration_us:.2f} us",
                )
            notes.append("the ncu report held no usable metrics")
        else:
            notes.append(run.note)
    return events.model_copy(
        update={"note": f"event timing only ({how} harness): " + "; ".join(notes)}
    )


def _kernel_regex(inp: ProfileInput, store: ArtifactStore) -> str:
    """ncu's kernel filter: the target's (dominant) kernel when the state defines it, else the first launch."""
    if inp.kernel_regex:
        return inp.kernel_regex
    name, _ = profiled_kernel(inp.target, inp.kernel_times)
    if not name:
        return ""
    return name if f"def {name}(" in store.get_text(inp.source) else ""
