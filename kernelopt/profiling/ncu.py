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
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

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
    return [
        *cmd,
        sys.executable,
        "-m",
        "kernelopt.profiling.harness_runner",
        str(harness),
        "--mode",
        "ncu",
    ]


def run_ncu(
    harness: Path,
    workdir: Path,
    kernel_regex: str = "",
    timeout_s: float = 600.0,
    ncu: str | None = None,
) -> NcuRun:
    import time

    ncu = ncu or find_ncu()
    if ncu is None:
        return NcuRun(ok=False, note="ncu not found (PATH, /usr/local/cuda/bin, /opt/nvidia)")
    stem = workdir / "profile"
    cmd = profile_command(ncu, harness, stem, kernel_regex)
    started = time.monotonic()
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, check=False)
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
