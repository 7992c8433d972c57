"""Distilling an Nsight Compute report into the few numbers a prompt can afford.

A raw ``--set full`` report is ~60K tokens; the planner gets the fields of
docs/method.md#agents only: SOL compute / memory (% of peak), duration, registers per
thread, spills, achieved occupancy and the top-3 rule findings by estimated
speedup.  Input is what ``ncu --import`` prints:

* ``--page details --csv --print-units base``: one row per metric
  (``Section Name``, ``Metric Name``, ``Metric Unit``, ``Metric Value``), and
  in recent versions rule rows (``Rule Name``, ``Rule Type``, ``Rule
  Description``, ``Estimated Speedup``);
* ``--page details`` as text: the rule findings (``OPT`` / ``WRN`` blocks with
  ``Est. Speedup: N%``) for versions whose CSV lacks rule columns;
* ``--page raw --csv --print-units base``: metric ids as columns, a units
  row, one row per kernel (fallback for any number the details lack).

All parsers are pure and tolerant: a missing number is ``None``, never a guess.
"""

from __future__ import annotations

import csv
import io
import re
from dataclasses import dataclass, field

TIME_UNITS_US = {
    "ns": 1e-3,
    "nsecond": 1e-3,
    "us": 1.0,
    "usecond": 1.0,
    "ms": 1e3,
    "msecond": 1e3,
    "s": 1e6,
    "second": 1e6,
}

SOL_SECTION = "GPU Speed Of Light Throughput"
RAW_METRICS = {
    "duration": "gpu__time_duration.sum",
    "sol_compute": "sm__throughput.avg.pct_of_peak_sustained_elapsed",
    "sol_memory": "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed",
    "registers": "launch__registers_per_thread",
    "occupancy": "sm__warps_active.avg.pct_of_peak_sustained_active",
}
MAX_RULE_CHARS = 240


@dataclass
class Rule:
    name: str
    kind: str  # OPT / WRN / INF
    section: str
    description: str
    speedup_pct: float | None

    def render(self) -> str:
        est = f" (est. speedup {self.speedup_pct:.0f}%)" if self.speedup_pct is not None else ""
        label = _words(self.section or self.name)
        where = f"[{label}] " if label else ""
        text = " ".join(self.description.split())
        room = MAX_RULE_CHARS - len(where) - len(est)
        if len(text) > room:
            text = text[: max(0, room - 3)].rstrip() + "..."
        return f"{where}{text}{est}"


@dataclass
class Distilled:
    duration_us: float | None = None
    sol_compute_pct: float | None = None
    sol_memory_pct: float | None = None
    registers_per_thread: int | None = None
    spills: int | None = None
    achieved_occupancy_pct: float | None = None
    kernel_name: str = ""
    rules: list[Rule] = field(default_factory=list)

    def top_rules(self, n: int = 3) -> list[str]:
        actionable = [
            r for r in self.rules if r.kind in ("OPT", "WRN") and not _is_profiler_note(r)
        ]
        ranked = sorted(
            actionable,
            key=lambda r: (-(r.speedup_pct if r.speedup_pct is not None else -1.0), r.section),
        )
        return [r.render() for r in ranked[:n]]


def _words(identifier: str) -> str:
    """'ComputeWorkloadAnalysis' / 'MemoryWorkloadAnalysis_Chart' -> words, as the text page has them."""
    spaced = re.sub(r"(?<=[a-z])(?=[A-Z])", " ", identifier.replace("_", " "))
    return " ".join(spaced.split())


def _is_profiler_note(rule: Rule) -> bool:
    """Findings about the profiling run itself (PM sampling interval), not about the kernel."""
    return "pmsampling" in (rule.name + rule.section).replace(" ", "").lower()


def number(text: str | None) -> float | None:
    """'1,234.5' -> 1234.5; 'n/a', '' -> None."""
    if text is None:
        return None
    cleaned = text.strip().replace(",", "")
    if not cleaned:
        return None
    try:
        return float(cleaned)
    except ValueError:
        return None


def _to_us(value: float | None, unit: str) -> float | None:
    if value is None:
        return None
    factor = TIME_UNITS_US.get(unit.strip().lower())
    return None if factor is None else value * factor


def _csv_rows(text: str) -> list[dict[str, str]]:
    """CSV rows of an ncu export, skipping the ``==PROF==`` lines ncu may print first."""
    lines = [ln for ln in text.splitlines() if ln.startswith('"')]
    return list(csv.DictReader(io.StringIO("\n".join(lines))))


def distill_details_csv(text: str, out: Distilled | None = None) -> Distilled:
    """Metrics (and rules, where the CSV has them) of the FIRST kernel in a details export."""
    out = out or Distilled()
    rows = _csv_rows(text)
    if not rows:
        return out
    first_id = rows[0].get("ID", "")
    for row in rows:
        if row.get("ID", "") != first_id:
            break
        out.kernel_name = out.kernel_name or row.get("Kernel Name", "")
        section = row.get("Section Name", "")
        name = (row.get("Metric Name") or "").strip()
        unit = row.get("Metric Unit") or ""
        value = number(row.get("Metric Value"))
        if name:
            _metric(out, section, name, unit, value)
        rule_name = (row.get("Rule Name") or "").strip()
        if rule_name and not name:
            out.rules.append(
                Rule(
                    name=rule_name,
                    kind=(row.get("Rule Type") or "").strip().upper(),
                    section=section,
                    description=row.get("Rule Description") or "",
                    speedup_pct=number(row.get("Estimated Speedup")),
                )
            )
    return out


def _metric(out: Distilled, section: str, name: str, unit: str, value: float | None) -> None:
    lowered = name.lower()
    if name == "Duration" and out.duration_us is None:
        out.duration_us = _to_us(value, unit)
    elif name == "Compute (SM) Throughput" and section == SOL_SECTION:
        out.sol_compute_pct = value
    elif name == "Memory Throughput" and section == SOL_SECTION and unit.strip() == "%":
        out.sol_memory_pct = value
    elif name == "Registers Per Thread" and value is not None:
        out.registers_per_thread = int(value)
    elif name == "Achieved Occupancy":
        out.achieved_occupancy_pct = value
    elif "spill" in lowered and value is not None and "overhead" not in lowered:
        out.spills = int(value) + (out.spills or 0)


_RULE_START = re.compile(r"^\s+(OPT|WRN|INF)\s{2,}(.*)$")
_SECTION = re.compile(r"^\s*Section:\s*(.+?)\s*$")
_SPEEDUP = re.compile(r"Est(?:imated|\.)?\s*(?:Local\s+|Global\s+)?Speedup:\s*([\d.,]+)\s*%", re.I)
_KERNEL_HEADER = re.compile(r"^\s{0,4}\S.*\(\d+,\s*\d+,\s*\d+\)x\(\d+,\s*\d+,\s*\d+\)")


def parse_rules_text(text: str) -> list[Rule]:
    """Rule findings of the FIRST kernel in a text details export.

    A finding starts with ``OPT``/``WRN``/``INF`` at the section's indent and
    continues on more deeply indented lines; a blank or ``-----`` line ends it.
    """
    rules: list[Rule] = []
    section = ""
    current: Rule | None = None
    indent = 0
    kernels_seen = 0
    for line in text.splitlines():
        if _KERNEL_HEADER.match(line):
            kernels_seen += 1
            if kernels_seen > 1:
                break
            current = None
            continue
        sec = _SECTION.match(line)
        if sec:
            section, current = sec.group(1), None
            continue
        start = _RULE_START.match(line)
        if start:
            current = Rule(
                name="", kind=start.group(1), section=section, description="", speedup_pct=None
            )
            rules.append(current)
            indent = len(line) - len(line.lstrip())
            _rule_text(current, start.group(2))
            continue
        stripped = line.strip()
        deeper = len(line) - len(line.lstrip()) > indent
        if current is not None and stripped and not stripped.startswith("---") and deeper:
            _rule_text(current, stripped)
        else:
            current = None
    return rules


def _rule_text(rule: Rule, text: str) -> None:
    match = _SPEEDUP.search(text)
    if match:
        rule.speedup_pct = number(match.group(1))
        text = _SPEEDUP.sub("", text).strip(" ;,")
    if text:
        rule.description = f"{rule.description} {text}".strip()


def distill_raw_csv(text: str, out: Distilled | None = None) -> Distilled:
    """Fill numbers the details lacked from a raw-page export (first kernel row)."""
    out = out or Distilled()
    rows = _csv_rows(text)
    if len(rows) < 2:
        return out
    units, first = rows[0], rows[1]  # the row after the header holds the units

    def get(key: str) -> float | None:
        return number(first.get(RAW_METRICS[key]))

    if out.duration_us is None:
        out.duration_us = _to_us(get("duration"), units.get(RAW_METRICS["duration"], "ns") or "ns")
    if out.sol_compute_pct is None:
        out.sol_compute_pct = get("sol_compute")
    if out.sol_memory_pct is None:
        out.sol_memory_pct = get("sol_memory")
    if out.registers_per_thread is None and get("registers") is not None:
        out.registers_per_thread = int(get("registers") or 0)
    if out.achieved_occupancy_pct is None:
        out.achieved_occupancy_pct = get("occupancy")
    if out.spills is None:
        local = [
            number(v) for k, v in first.items() if k and "local_op_st" in k and k.endswith(".sum")
        ]
        if any(v is not None for v in local):
            out.spills = int(sum(v for v in local if v is not None))
    out.kernel_name = out.kernel_name or first.get("Kernel Name", "")
    return out


def distill(details_csv: str = "", details_text: str = "", raw_csv: str = "") -> Distilled:
    """Everything we keep from one kernel's report."""
    out = distill_details_csv(details_csv) if details_csv else Distilled()
    if not out.rules and details_text:
        out.rules = parse_rules_text(details_text)
    if raw_csv:
        distill_raw_csv(raw_csv, out)
    return out
