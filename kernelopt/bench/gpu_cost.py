"""GPU-seconds per verdict and per problem of a suite run, and before/after two runs.

Issue 22 asks what one verdict costs and whether that cost fell.  Two sources,
each labelled where it is shown:

* the outcomes: a campaign's GPU-seconds (what its budget charged), its
  candidates, and the GPU-seconds of each model-level verdict (gates 3-4);
* the GPU worker's notes (``kernelopt.gpu_busy``), copied into the results
  folder as ``gpu-busy/<campaign>.jsonl``: how long each GPU activity held the
  worker (one ``gate_candidate`` is one gates 1-2 verdict) and how busy the GPU
  was during the search.  Results from before the notes existed have none.

    python -m kernelopt.bench.gpu_cost RESULTS [--before OLD_RESULTS] [--home HOME]

writes ``RESULTS/gpu_cost.md`` (with ``--home``, first copies the notes of
RESULTS' campaigns from that ``KERNELOPT_HOME``).
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
from collections.abc import Sequence
from pathlib import Path

from kernelopt.contracts.base import Frozen
from kernelopt.gpu_busy import busy_path, load_activities, summarize_campaign
from kernelopt.log import get_logger

from .results import ProblemResult, load_results
from .tables import Table, md_table

log = get_logger(__name__)
COST_FILE = "gpu_cost.md"


class Spread(Frozen):
    """How a cost is spread over its items: count, median, 90th percentile, total."""

    count: int = 0
    median: float | None = None
    p90: float | None = None
    total: float = 0.0


def spread(values: Sequence[float]) -> Spread:
    if not values:
        return Spread()
    ordered = sorted(values)
    p90 = (
        ordered[0]
        if len(ordered) == 1
        else statistics.quantiles(ordered, n=10, method="inclusive")[-1]
    )
    return Spread(
        count=len(ordered), median=statistics.median(ordered), p90=p90, total=sum(ordered)
    )


class ProblemCost(Frozen):
    """One problem's costs, from its outcome and (when present) its worker notes."""

    key: str  # levelN/name, as in the results folder
    gpu_seconds: float
    candidates: int
    model_verdicts: list[float]  # GPU-s of each model-level verdict (gates 3-4)
    activities: dict[str, list[float]]  # activity name -> seconds each held the GPU worker
    busy_search: float | None = None  # mean GPU utilisation % over the search span

    @property
    def per_candidate(self) -> float | None:
        return self.gpu_seconds / self.candidates if self.candidates else None


class GpuCost(Frozen):
    problems: list[ProblemCost]

    @property
    def per_problem(self) -> Spread:
        return spread([p.gpu_seconds for p in self.problems])

    @property
    def per_candidate(self) -> Spread:
        return spread([c for p in self.problems if (c := p.per_candidate) is not None])

    @property
    def model_verdicts(self) -> Spread:
        return spread([s for p in self.problems for s in p.model_verdicts])

    def activity(self, name: str) -> Spread:
        return spread([s for p in self.problems for s in p.activities.get(name, [])])

    @property
    def activity_names(self) -> list[str]:
        return sorted({n for p in self.problems for n in p.activities})


def _key(result: ProblemResult) -> str:
    return result.name if result.level is None else f"level{result.level}/{result.name}"


def problem_cost(result: ProblemResult, results_dir: Path) -> ProblemCost:
    o = result.outcome
    notes = load_activities(results_dir, o.campaign_id)
    activities: dict[str, list[float]] = {}
    for note in notes:
        activities.setdefault(note.activity, []).append(max(0.0, note.ended_at - note.started_at))
    busy = summarize_campaign(notes) if notes else None
    search = busy.search_span if busy is not None and busy.measured else None
    return ProblemCost(
        key=_key(result),
        gpu_seconds=o.used.gpu_seconds,
        candidates=o.candidates_tried,
        model_verdicts=[v.gpu_seconds for v in o.model_verdicts if v.gpu_seconds > 0],
        activities=activities,
        busy_search=search.mean_gpu if search is not None else None,
    )


def gpu_cost(results_dir: str | Path) -> GpuCost:
    """Every finished problem's costs under ``results_dir``."""
    root = Path(results_dir)
    return GpuCost(problems=[problem_cost(r, root) for r in load_results(root)])


def collect_notes(results_dir: str | Path, home: Path) -> int:
    """Copy the worker notes of the results' campaigns from ``home``; how many were copied.

    The notes live in the KERNELOPT_HOME of the machine that ran the workers;
    the results folder is what gets committed, so the notes travel with it.
    """
    root = Path(results_dir)
    copied = 0
    for r in load_results(root):
        source = busy_path(home, r.outcome.campaign_id)
        if not source.is_file():
            continue
        target = busy_path(root, r.outcome.campaign_id)
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source, target)
        except OSError as exc:  # the notes are a diagnostic: the report goes on without them
            log.warning("bench.notes_not_copied", source=str(source), error=str(exc)[:200])
            continue
        copied += 1
    return copied


def _number_text(value: float | None, spec: str = ".1f") -> str:
    return "-" if value is None else f"{value:{spec}}"


def _ratio(after: float | None, before: float | None) -> str:
    return "-" if after is None or not before else f"{after / before:.2f}x"


def _rows(cost: GpuCost) -> list[tuple[str, Spread]]:
    rows = [
        ("GPU-s per problem (campaign total, outcome)", cost.per_problem),
        ("GPU-s per candidate (campaign total / candidates tried, outcome)", cost.per_candidate),
        ("GPU-s per model-level verdict (gates 3-4, outcome)", cost.model_verdicts),
    ]
    rows += [
        (f"s per `{n}` activity (GPU worker notes)", cost.activity(n)) for n in cost.activity_names
    ]
    return rows


def cost_table(after: GpuCost, before: GpuCost | None = None) -> Table:
    """One row per measure: count, median, p90 and total; before beside it when given."""
    head = ["measure", "n", "median", "p90", "total"]
    if before is not None:
        head += ["before n", "before median", "before p90", "median after/before"]
    olds = dict(_rows(before)) if before is not None else {}
    rows = []
    labels = [label for label, _ in _rows(after)]
    labels += [label for label in olds if label not in labels]
    news = dict(_rows(after))
    for label in labels:
        new = news.get(label, Spread())
        row = [
            label,
            str(new.count),
            _number_text(new.median),
            _number_text(new.p90),
            _number_text(new.total, ".0f"),
        ]
        if before is not None:
            old = olds.get(label, Spread())
            row += [
                str(old.count),
                _number_text(old.median),
                _number_text(old.p90),
                _ratio(new.median, old.median),
            ]
        rows.append(row)
    return head, rows


def problem_cost_table(after: GpuCost, before: GpuCost | None = None) -> Table:
    """Per problem: GPU-s, per candidate, gates 1-2 verdicts, GPU busy; before beside it."""
    head = [
        "problem",
        "GPU-s",
        "candidates",
        "GPU-s per candidate",
        "gate_candidate n",
        "gate_candidate median s",
        "GPU busy during search",
    ]
    if before is not None:
        head += ["before GPU-s", "before GPU-s per candidate", "GPU-s after/before"]
    news = {p.key: p for p in after.problems}
    olds = {p.key: p for p in before.problems} if before is not None else {}
    rows = []
    for key in sorted(news.keys() | olds.keys()):
        new, old = news.get(key), olds.get(key)
        gates = new.activities.get("gate_candidate", []) if new else []
        row = [
            key,
            _number_text(new.gpu_seconds if new else None, ".0f"),
            str(new.candidates) if new else "-",
            _number_text(new.per_candidate if new else None),
            str(len(gates)) if new else "-",
            _number_text(statistics.median(gates) if gates else None),
            _number_text(new.busy_search if new else None, ".0f")
            + ("%" if new and new.busy_search is not None else ""),
        ]
        if before is not None:
            row += [
                _number_text(old.gpu_seconds if old else None, ".0f"),
                _number_text(old.per_candidate if old else None),
                _ratio(new.gpu_seconds if new else None, old.gpu_seconds if old else None),
            ]
        rows.append(row)
    return head, rows


COST_NOTE = (
    "GPU-s is what the campaign's budget charged (the GPU activities' own run time, not "
    "their time in the queue); per candidate it includes the compile, triage and "
    "model-level gates the campaign needed. Activity seconds are how long each GPU "
    "activity held the GPU worker, from the worker's notes (one `gate_candidate` is one "
    "gates 1-2 verdict); problems run before the notes existed show '-'. GPU busy is the "
    "mean NVML utilisation from the first to the last search activity, gaps included."
)


def render_markdown(after: GpuCost, before: GpuCost | None = None) -> str:
    title = "GPU-seconds per verdict and per problem" + (", before and after" if before else "")
    lines = [f"## {title}", "", COST_NOTE, "", *md_table(cost_table(after, before)), ""]
    lines += ["### Per problem", "", *md_table(problem_cost_table(after, before)), ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", type=Path)
    parser.add_argument("--before", type=Path, default=None, help="the earlier results folder")
    parser.add_argument("--home", type=Path, default=None, help="copy worker notes from here")
    args = parser.parse_args(argv)
    if args.home is not None:
        log.info("bench.notes_copied", count=collect_notes(args.results, args.home))
    before = gpu_cost(args.before) if args.before is not None else None
    out = args.results / COST_FILE
    out.write_text(render_markdown(gpu_cost(args.results), before), encoding="utf-8")
    sys.stdout.write(f"{out}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
