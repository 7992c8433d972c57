"""Hostile -- looks for the shared reference bundle from inside its process and says what it found.

It raises a report instead of computing anything: which of the bundle's files
it could rewrite, and whether the kept reference outputs beside its inputs
are visible at all.
"""

import json
from pathlib import Path


def _attempt(action) -> str:
    try:
        action()
    except OSError as exc:
        return type(exc).__name__
    return "done"


def _rewrite_first(directory: Path) -> None:
    first = sorted(directory.glob("*.pt"))[0]
    with open(first, "r+b") as handle:
        handle.write(b"\0")


def _probe() -> dict:
    inputs = Path(json.loads(Path("job.json").read_text())["inputs_dir"])
    beside = inputs.parent
    return {
        "rewrite_input": _attempt(lambda: _rewrite_first(inputs)),
        "plant_beside_inputs": _attempt(lambda: (beside / "planted.pt").write_bytes(b"x")),
        "refs_visible": (beside / "refs").exists(),
        "pristine_visible": (beside / "inputs.pristine").exists(),
    }


raise RuntimeError("PROBE " + json.dumps(_probe()))
