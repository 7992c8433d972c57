"""Running Nsight Compute on one kernel harness, and telling why it could not run.

``ncu --set full --clock-control none --replay-mode kernel`` (docs/method.md#agents;
``--clock-control none`` because our hosts pin clocks themselves) with
``--profile-from-start off``: the harness runner opens the profiler range
around one steady-state launch.  The report is exported three ways (details
CSV, details text, raw CSV) for the distiller; the ``.ncu-rep`` file itself
is kept as an artifact.  A missing binary, missing counter permission
(``ERR_NVGPUCTRPERM``), a timeout or "no kernels were profiled" are returned
as a note -- the caller falls back to event timing; profiling never fails a
search.

The harness imports candidate code, so ncu and its harness runner run in the
gate children's sandbox (``gates.sandbox.wrap_command``: no network, the
allow-listed environment, the project read-only, the workdir writable, of the
store only the blobs the harness's ``compiled.json`` reaches).  ncu's own
install directory is bound read-only; counters need the host's
``NVreg_RestrictProfilingToAdminUsers=0``, since the sandbox holds no
``CAP_SYS_ADMIN`` (without it ncu reports ``ERR_NVGPUCTRPERM``, a note).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from kernelopt.errors import InfrastructureError
from kernelopt.profiling.harness_runner import runner_command

NCU_CANDIDATES = (
    "/usr/local/cuda/bin/ncu",
    "/opt/nvidia/nsight-compute/ncu",
    "/usr/bin/ncu",
)
PERMISSION_MARKERS = ("ERR_NVGPUCTRPERM", "permission to access NVIDIA GPU Performance Counters")


@dataclass
class NcuRun:
    ok: bool
    note: str = ""
    report: Path | None = None
    details_csv: str = ""
    details_text: str = ""
    raw_csv: str = ""
    command: str = ""
    seconds: float = 0.0


def find_ncu() -> str | None:
    env = os.environ.get("KERNELOPT_NCU")
    if env:
        return env if Path(env).is_file() else None
    found = shutil.which("ncu")
    if found:
        return found
    for candidate in NCU_CANDIDATES:
        if Path(candidate).is_file():
            return candidate
    root = Path("/opt/nvidia")
    if root.is_dir():
        for path in sorted(root.glob("nsight-compute*/ncu")):
            return str(path)
    return None


def profile_command(
    ncu: str, harness: Path, report_stem: Path, kernel_regex: str = ""
) -> list[str]:
    cmd = [
        ncu,
        "--set",
        "full",
        "--clock-control",
        "none",
        "--replay-mode",
        "kernel",
        "--profile-from-start",
        "off",
        "--launch-count",
        "1",
        "--force-overwrite",
        "--export",
        str(report_stem),
    ]
    if kernel_regex:
        cmd += ["--kernel-name", f"regex:{kernel_regex}"]
    # ncu in the sandbox failed to launch a venv's symlinked interpreter ("Launching the
    # target application failed") but profiles it behind a shell (ncu follows children)
    return [
        *cmd,
        "/bin/sh",
        "-c",
        'exec "$0" "$@"',
        *runner_command(harness, "ncu"),
    ]


def tool_dirs(tool: str, opt_root: Path = Path("/opt/nvidia")) -> list[Path]:
    """The install directories of a profiler binary, read-only in the sandbox so ncu finds
    its own files: its prefix (``/opt/nvidia/nsight-compute/VER``, or the one above a
    ``bin/``) and, because the CUDA toolkit's ``bin/ncu`` is only a launcher that looks
    for an ``nsight-compute*`` folder beside the toolkit or under ``/opt/nvidia``, those."""
    real = Path(os.path.realpath(tool)).parent
    if real.name == "bin":
        real = real.parent
    found = [real] if real.is_dir() and str(real) not in ("/", "/usr", "/usr/local") else []
    for root in (real, opt_root):
        if root.is_dir():
            found += [d for d in sorted(root.glob("nsight-compute*")) if d.is_dir()]
    return list(dict.fromkeys(found))


def sandboxed(
    cmd: list[str], harness: Path, workdir: Path, store_root: Path | None = None
) -> tuple[list[str], dict[str, str]]:
    """``cmd`` (ncu or the harness runner) in the gate sandbox, and its environment.

    The harness directory and the workdir are writable (ncu writes its report
    there); of the store only the blobs reachable from the harness's
    ``compiled.json`` are visible, and ``KERNELOPT_HOME`` names that store so
    ``open_store()`` inside finds them at their host paths.
    """
    from gates import sandbox

    ro: list[Path] = tool_dirs(cmd[0]) if Path(cmd[0]).is_absolute() else []
    extra: dict[str, str] = {}
    compiled = Path(harness).parent / "compiled.json"
    if store_root is not None and compiled.is_file():
        ro += sandbox.store_blobs(Path(store_root), [compiled])
        if Path(store_root).name == "artifacts":
            extra["KERNELOPT_HOME"] = str(Path(store_root).parent)
    return sandbox.wrap_command(
        cmd, ro=ro, rw=[Path(workdir), Path(harness).parent], cwd=Path(workdir), extra=extra
    )


def run_ncu(
    harness: Path,
    workdir: Path,
    kernel_regex: str = "",
    timeout_s: float = 600.0,
    ncu: str | None = None,
    store_root: Path | None = None,
) -> NcuRun:
    """Profile one steady-state launch of ``harness`` under ncu, sandboxed (module docstring)."""
    import time

    ncu = ncu or find_ncu()
    if ncu is None:
        return NcuRun(ok=False, note="ncu not found (PATH, /usr/local/cuda/bin, /opt/nvidia)")
    stem = workdir / "profile"
    try:
        cmd, env = sandboxed(
            profile_command(ncu, harness, stem, kernel_regex), harness, workdir, store_root
        )
    except InfrastructureError as exc:  # no working sandbox: no candidate code runs
        return NcuRun(ok=False, note=f"ncu not run: {exc}")
    started = time.monotonic()
    try:
        proc = subprocess.run(
            cmd, capture_output=True, text=True, timeout=timeout_s, check=False, env=env
        )
    except subprocess.TimeoutExpired:
        return NcuRun(
            ok=False, note=f"ncu timed out after {timeout_s:.0f} s", command=" ".join(cmd)
        )
    except OSError as exc:
        return NcuRun(ok=False, note=f"ncu could not start: {exc}", command=" ".join(cmd))
    seconds = time.monotonic() - started
    output = proc.stdout + "\n" + proc.stderr
    if any(marker in output for marker in PERMISSION_MARKERS):
        return NcuRun(
            ok=False,
            note="no permission for GPU performance counters (ERR_NVGPUCTRPERM)",
            command=" ".join(cmd),
            seconds=seconds,
        )
    report = stem.with_suffix(".ncu-rep")
    if not report.is_file():
        tail = " | ".join(line for line in output.strip().splitlines()[-4:] if line.strip())
        reason = "no kernels were profiled" if "No kernels were profiled" in output else tail
        return NcuRun(
            ok=False,
            note=f"ncu produced no report (exit {proc.returncode}): {reason[:400]}",
            command=" ".join(cmd),
            seconds=seconds,
        )
    run = NcuRun(ok=True, report=report, command=" ".join(cmd), seconds=seconds)
    run.details_csv = _export(ncu, report, ["--page", "details", "--csv", "--print-units", "base"])
    run.details_text = _export(ncu, report, ["--page", "details", "--print-units", "base"])
    run.raw_csv = _export(ncu, report, ["--page", "raw", "--csv", "--print-units", "base"])
    if not (run.details_csv or run.raw_csv):
        run.ok = False
        run.note = "ncu wrote a report but could not export it"
    return run


def _export(ncu: str, report: Path, args: list[str]) -> str:
    try:
        proc = subprocess.run(
            [ncu, "--import", str(report), *args],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    except (subprocess.TimeoutExpired, OSError):
        return ""
    return proc.stdout if proc.returncode == 0 else ""
