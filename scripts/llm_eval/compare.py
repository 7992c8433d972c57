"""Runs side by side: the outcome tables of two or more evaluations of the same problems.

Issue 24 asks for a second run after the prompt changes and both reported together; the
reports are the ``report.json`` files ``llm_eval report`` writes, so nothing here reads a
campaign again.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from pathlib import Path
from typing import Any

from kernelopt.contracts.campaign import OutcomeCategory

# (label, row key, format): the columns each run contributes per problem
COLUMNS = (
    ("outcome", "outcome", ""),
    ("speedup", "speedup", "x"),
    ("best kernel", "best_kernel_speedup", "x"),
    ("candidates", "candidates", ""),
    ("parsed", "parsed", ""),
    ("compiled", "compiled", ""),
    ("correct", "correct", ""),
    ("tokens", "tokens", ""),
    ("GPU-s", "gpu_seconds", ".1f"),
)
OUTCOME_ORDER = [o.value for o in OutcomeCategory]  # the best first, in the last row's count
SUMMED = ("candidates", "parsed", "compiled", "correct", "tokens", "gpu_seconds")


def load_rows(path: Path) -> dict[str, dict[str, Any]]:
    """A report's rows by problem; a missing or foreign file is a clear error."""
    try:
        data = json.loads(path.read_text())
        rows = data["rows"]
        return {row["problem"]: row for row in rows}
    except FileNotFoundError:
        raise SystemExit(f"{path}: no such report (write it with `llm_eval report`)") from None
    except (ValueError, KeyError, TypeError) as err:
        raise SystemExit(f"{path}: not an llm_eval report.json ({err})") from None


def _cell(row: dict[str, Any] | None, key: str, spec: str) -> str:
    value = None if row is None else row.get(key)
    if value is None or value == "":
        return "-"
    if spec == "x":
        return f"{value:.3f}x"
    return f"{value:{spec}}" if spec else str(value)


def geomean(values: list[float]) -> float | None:
    """The geometric mean of positive values, or None when there are none."""
    kept = [v for v in values if v and v > 0]
    return math.exp(sum(math.log(v) for v in kept) / len(kept)) if kept else None


def _totals(rows: list[dict[str, Any] | None]) -> dict[str, Any]:
    present = [r for r in rows if r is not None]
    total: dict[str, Any] = {
        key: sum(r.get(key) or 0 for r in present) for key in SUMMED if present
    }
    total["speedup"] = geomean([r.get("speedup") or 0 for r in present])
    total["best_kernel_speedup"] = geomean([r.get("best_kernel_speedup") or 0 for r in present])
    counts = Counter(r.get("outcome") or "unfinished" for r in present)
    order = sorted(counts, key=lambda o: (OUTCOME_ORDER.index(o) if o in OUTCOME_ORDER else 9, o))
    total["outcome"] = ", ".join(f"{counts[o]} {o}" for o in order) if present else None
    return total


def compare_markdown(runs: list[tuple[str, dict[str, dict[str, Any]]]]) -> str:
    """One row per problem and column, one cell per run; a last row sums or takes geomeans."""
    problems = sorted({p for _, rows in runs for p in rows})
    labels = [label for label, _ in runs]
    head = ["problem", "column", *labels]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for problem in problems:
        for n, (name, key, spec) in enumerate(COLUMNS):
            cells = [_cell(rows.get(problem), key, spec) for _, rows in runs]
            lines.append("| " + " | ".join([problem if n == 0 else "", name, *cells]) + " |")
    totals = [_totals([rows.get(p) for p in problems]) for _, rows in runs]
    for n, (name, key, spec) in enumerate(COLUMNS):
        cells = [_cell(t, key, spec) for t in totals]
        lines.append("| " + " | ".join(["**all**" if n == 0 else "", name, *cells]) + " |")
    missing = [
        f"{label} has no row for {', '.join(sorted(set(problems) - set(rows)))}"
        for label, rows in runs
        if set(problems) - set(rows)
    ]
    lines += [
        "",
        "speedup: the whole model against torch.compile (geomean in the last row); best "
        "kernel: the best speedup gate 4 measured for a candidate on its own target; "
        "candidates, parsed, compiled, correct, tokens and GPU-s are summed.",
    ]
    if missing:
        lines += ["", *[f"* {m}" for m in missing]]
    return "\n".join(lines) + "\n"
