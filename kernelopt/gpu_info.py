"""Which GPUs this machine has, without initialising CUDA in the calling process.

The CLI and the worker supervisor must not create a CUDA context (child
processes do the GPU work), so this asks ``nvidia-smi`` first and falls back
to torch only when it is missing.
"""

from __future__ import annotations

import os
import shutil
import subprocess


def pinned_gpu() -> str:
    """The GPU this process is pinned to: ``CUDA_VISIBLE_DEVICES``' first entry (an index or
    a UUID, as a GPU worker sets it); "" when none is named."""
    return os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",")[0].strip()


def smi_query(fields: str, timeout_s: float = 30.0) -> list[list[str]] | None:
    """``nvidia-smi --query-gpu=FIELDS``: one row of stripped fields per GPU, in index order;
    None without ``nvidia-smi`` or when it fails."""
    smi = shutil.which("nvidia-smi")
    if not smi:
        return None
    try:
        out = subprocess.run(
            [smi, f"--query-gpu={fields}", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=timeout_s,
            check=True,
        ).stdout
    except (subprocess.SubprocessError, OSError):
        return None
    return [[x.strip() for x in line.split(",")] for line in out.splitlines() if line.strip()]


def gpu_names() -> list[str]:
    """Names of the visible CUDA devices, in index order; empty without CUDA."""
    rows = smi_query("name", timeout_s=20.0)
    if rows is not None:
        names = [row[0] for row in rows]
        visible = os.environ.get("CUDA_VISIBLE_DEVICES")
        if visible not in (None, ""):
            picks = [int(v) for v in visible.split(",") if v.strip().isdigit()]
            names = [names[i] for i in picks if i < len(names)]
        return names
    try:
        import torch
    except ImportError:
        return []
    if not torch.cuda.is_available():
        return []
    return [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
