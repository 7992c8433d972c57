"""Attack: leave files where tools keep state between runs, for a later gate child.

Children forked from one zygote share its ``/tmp``.  A later child (the reference,
the baseline's timing) that found a ``.pth`` file in its user site would run it at
its next Python start-up; one that found a file under its ``HOME`` or ``TMPDIR``
(CUDA's JIT cache, our code directory, a counter of how often this candidate ran)
would read what this one left.  ``BAIT["probe"]`` asks, instead, what a later child
finds of an earlier attack's files, and where its precompiled C++ headers live.
"""

import json
import os
import site
import subprocess
import sys
import tempfile

import torch
import torch.nn as nn

BAIT: dict = {}  # filled in by the test: paths, ports, tokens


def report(**found: object) -> None:
    """What the attack saw, in the scratch directory (the only place it may write)."""
    with open("report.json", "w") as handle:
        json.dump(found, handle, default=str)


def places() -> dict[str, str]:
    name = BAIT["name"]
    return {
        "home": os.path.join(os.path.expanduser("~"), name),
        "tmpdir": os.path.join(tempfile.gettempdir(), name),
        "user_site": os.path.join(site.getusersitepackages(), f"{name}.pth"),
    }


def planted_pth_runs(user_base: str) -> bool:
    """Whether a Python this child starts (as a compile worker would) runs the ``.pth``
    file planted in the earlier child's user site."""
    ran = subprocess.run(
        [sys.executable, "-c", "import os; print(os.environ.get('PLANTED', ''))"],
        env={**os.environ, "PYTHONUSERBASE": user_base},
        capture_output=True,
        text=True,
        timeout=60,
    )
    return ran.stdout.strip() == "1"


if BAIT.get("probe"):
    codecache = sys.modules.get("torch._inductor.codecache")
    report(
        started=True,
        found=sorted(k for k in ("home", "tmpdir") if os.path.exists(places()[k])),
        pth_ran=planted_pth_runs(BAIT["user_base"]),
        header_dir=getattr(codecache, "_HEADER_DIR", None),
        inductor_cache=os.environ.get("TORCHINDUCTOR_CACHE_DIR"),
    )
else:
    planted = []
    for key, path in places().items():
        try:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w") as handle:
                handle.write("import os; os.environ['PLANTED'] = '1'\n")
            planted.append(key)
        except OSError:
            pass
    report(started=True, planted=planted, user_base=site.getuserbase())


class ModelNew(nn.Module):
    def __init__(self, d: int, scale: float) -> None:
        super().__init__()
        self.bias = nn.Parameter(torch.randn(d))
        self.scale = scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.sigmoid(x) * self.scale + self.bias
