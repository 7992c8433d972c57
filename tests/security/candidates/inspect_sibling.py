"""Attack: reach into a sibling gate child through /proc and ptrace (same uid, same sandbox).

With ``BAIT["pid"]`` it tries the sibling's memory, environment, descriptors and
a ptrace attach ("parent": its own parent, the zygote that forks every trusted
child); without, it is the sibling: it reports its pid and stays alive a while.
"""

import ctypes
import json
import os
import time

import torch
import torch.nn as nn

BAIT: dict = {}  # filled in by the test: paths, ports, tokens


def report(**found: object) -> None:
    """What the attack saw, in the scratch directory (the only place it may write)."""
    with open("report.json", "w") as handle:
        json.dump(found, handle, default=str)


def attempt(action) -> str:
    try:
        action()
        return "reached"
    except OSError as exc:
        return type(exc).__name__


def read(path: str) -> None:
    with open(path, "rb") as handle:
        handle.read(1)


def open_any_descriptor(pid: int) -> None:
    """Listing the numbers is harmless; opening one would reach the sibling's files."""
    refused: OSError = PermissionError("no descriptor")
    for name in os.listdir(f"/proc/{pid}/fd"):
        try:
            os.close(os.open(f"/proc/{pid}/fd/{name}", os.O_RDONLY))
            return
        except OSError as exc:
            refused = exc
    raise refused


if "pid" in BAIT:
    pid = os.getppid() if BAIT["pid"] == "parent" else BAIT["pid"]
    libc = ctypes.CDLL(None, use_errno=True)
    found = {
        "mem": attempt(lambda: read(f"/proc/{pid}/mem")),
        "environ": attempt(lambda: read(f"/proc/{pid}/environ")),
        "fd": attempt(lambda: open_any_descriptor(pid)),
        "ptrace": "reached" if libc.ptrace(16, pid, 0, 0) == 0 else "refused",
    }
    report(started=True, target=pid, **found)
else:
    report(started=True, pid=os.getpid())
    time.sleep(BAIT.get("linger", 0))


class ModelNew(nn.Module):
    def __init__(self, d: int, scale: float) -> None:
        super().__init__()
        self.bias = nn.Parameter(torch.randn(d))
        self.scale = scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.sigmoid(x) * self.scale + self.bias
