"""Which GPUs this machine has, without initialising CUDA in the calling process.

The CLI and the worker supervisor must not create a CUDA context (child
processes do the GPU work), so this asks ``nvidia-smi`` first and falls back
to torch only when it is missing.
"""

from __future__ import annotations

import os
import shutil
import subprocess


def gpu_names() -> list[str]:
    """Names of the visible CUDA devices, in index order; empty without CUDA."""
    smi = shutil.which("nvidia-smi")
    if smi:
        try:
            out = subprocess.run(
                [smi, "--query-gpu=name", "--format=csv,noheader"],
                capture_output=True,
                text=True,
                timeout=20,
                check=True,
            ).stdout
            names = [line.strip() for line in out.splitlines() if line.strip()]
            visible = os.environ.get("CUDA_VISIBLE_DEVICES")
            if visible not in (None, ""):
                picks = [int(v) for v in visible.split(",") if v.strip().isdigit()]
                names = [names[i] for i in picks if i < len(names)]
            return names
        except (subprocess.SubprocessError, OSError, ValueError):
            pass
    try:
        import torch
    except ImportError:
        return []
    if not torch.cuda.is_available():
        return []
    return [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
