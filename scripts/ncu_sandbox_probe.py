"""Why ncu cannot profile inside the gate sandbox on this host: a maintainer's probe.

    source scripts/device_env.sh; source scripts/device_bwrap.sh; python3 -m scripts.ncu_sandbox_probe

Runs ncu the way the profiler does (``kernelopt.profiling.ncu.sandboxed``) on three
targets, from the simplest up, and once outside the sandbox for contrast, and prints each
command's exit code and whole output: ``ncu --version``, ncu on ``/bin/true`` (a launch
with no kernel: "No kernels were profiled" means launching works), and ncu on a
one-kernel torch snippet.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

from kernelopt.profiling.ncu import find_ncu, sandboxed, tool_dirs

SNIPPET = "import torch; x = torch.ones(1 << 20, device='cuda'); (x * 2).sum().item()"


def _run(label: str, cmd: list[str], env: dict[str, str] | None) -> None:
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=180, check=False)
    sys.stdout.write(f"\n=== {label}: exit {proc.returncode}\n$ {' '.join(cmd)[:1500]}\n")
    sys.stdout.write((proc.stdout + proc.stderr)[-3000:] + "\n")


def main() -> int:
    ncu = find_ncu()
    if ncu is None:
        sys.stdout.write("no ncu on this host\n")
        return 1
    sys.stdout.write(f"ncu {ncu} -> {os.path.realpath(ncu)}; bound: {tool_dirs(ncu)}\n")
    with tempfile.TemporaryDirectory(prefix="ncu-probe-") as tmp:
        work = Path(tmp)
        (work / "harness.py").write_text(SNIPPET + "\n")
        profile = [ncu, "--force-overwrite", "--export", str(work / "probe")]
        targets = {
            "python": [*profile, sys.executable, "-c", "print('no CUDA')"],
            "torch": [*profile, sys.executable, str(work / "harness.py")],
            "sh-torch": [*profile, "/bin/sh", "-c", f"exec {sys.executable} {work / 'harness.py'}"],
        }
        for label, cmd in targets.items():
            wrapped, env = sandboxed(cmd, work / "harness.py", work)
            _run(f"sandboxed {label}", wrapped, env)
        _run("unsandboxed torch", targets["torch"], None)
    return 0


if __name__ == "__main__":
    sys.exit(main())
