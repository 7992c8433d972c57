"""The report's three figures, drawn with matplotlib's object API on the Agg canvas.

``Figure`` + ``FigureCanvasAgg`` instead of ``pyplot``: no global figure
state, no GUI backend selection, safe to call from a worker thread.  Each
function returns PNG bytes; the report embeds them (HTML) or writes them next
to the Markdown.
"""

from __future__ import annotations

import io
import math

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from kernelopt.contracts import OutcomeCategory

from .aggregate import BELOW_BUCKETS, BUCKETS, BenchSummary, amdahl_ceiling

COLORS = {
    OutcomeCategory.OPTIMIZED.value: "#2b8a3e",
    OutcomeCategory.MATCHED.value: "#74b816",
    OutcomeCategory.SYNTHESIS_FAILURE.value: "#c92a2a",
    OutcomeCategory.FALLBACK.value: "#868e96",
}
AMDAHL_S = ((2.0, ":"), (10.0, "--"), (math.inf, "-"))


def _png(fig: Figure) -> bytes:
    FigureCanvasAgg(fig)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    return buf.getvalue()


def speedup_histogram(summary: BenchSummary) -> bytes:
    """Problems per paper bucket, stacked by level; the <1.01x rest is noted, not drawn."""
    fig = Figure(figsize=(7.0, 3.6))
    ax = fig.add_subplot()
    labels = [label for label, _, _ in reversed(BUCKETS)]  # slowest bucket on the left
    x = np.arange(len(labels))
    bottom = np.zeros(len(labels))
    for level in summary.levels:
        heights = np.array([level.buckets.get(label, 0) for label in labels], dtype=float)
        ax.bar(x, heights, bottom=bottom, label=level.label)
        bottom += heights
    ax.set_xticks(x, labels)
    ax.set_ylabel("problems")
    rest = summary.overall.buckets.get(BELOW_BUCKETS, 0)
    ax.set_title(f"Speedup over torch.compile ({rest} problems below 1.01x not shown)")
    if summary.levels:
        ax.legend(fontsize=8)
    return _png(fig)


def speedup_vs_library_fraction(summary: BenchSummary) -> bytes:
    """Each problem at (f, speedup) with the Amdahl ceilings for S = 2, 10 and inf."""
    fig = Figure(figsize=(7.0, 4.2))
    ax = fig.add_subplot()
    rows = [r for r in summary.problems if r.library_fraction is not None]
    top = max([3.0, *(r.speedup * 1.5 for r in rows)])
    f = np.linspace(0.0, 0.999, 400)
    for s, style in AMDAHL_S:
        ceiling = np.array([amdahl_ceiling(float(v), s) for v in f])
        label = "S = inf" if math.isinf(s) else f"S = {s:g}"
        ax.plot(f, np.minimum(ceiling, top), style, color="#495057", lw=1, label=f"Amdahl {label}")
    for category, color in COLORS.items():
        for single, marker in ((False, "o"), (True, "x")):
            pts = [r for r in rows if r.category.value == category and r.single_kernel == single]
            if pts:
                ax.scatter(
                    [r.library_fraction for r in pts],
                    [r.speedup for r in pts],
                    s=18,
                    color=color,
                    marker=marker,
                    label=f"{category} (single-kernel: not frozen)" if single else category,
                    zorder=3,
                )
    ax.axhline(summary.gamma, color="#e8590c", lw=0.8, label=f"gamma = {summary.gamma:g}")
    ax.set_yscale("log")
    ax.set_ylim(0.5, top)
    ax.set_xlim(0.0, 1.0)
    ax.set_xlabel("library fraction f (time in vendor calls)")
    ax.set_ylabel("model speedup")
    missing = len(summary.problems) - len(rows)
    ax.set_title(f"Speedup vs library fraction ({missing} problems without triage)")
    ax.legend(fontsize=7, loc="upper right")
    return _png(fig)


def outcomes_per_level(summary: BenchSummary) -> bytes:
    """Stacked outcome counts, one bar per level plus "all"."""
    fig = Figure(figsize=(7.0, 3.2))
    ax = fig.add_subplot()
    groups = [*summary.levels, summary.overall]
    y = np.arange(len(groups))
    left = np.zeros(len(groups))
    for category, color in COLORS.items():
        widths = np.array([g.counts.get(category, 0) for g in groups], dtype=float)
        ax.barh(y, widths, left=left, color=color, label=category)
        left += widths
    ax.set_yticks(y, [g.label for g in groups])
    ax.invert_yaxis()
    ax.set_xlabel("problems")
    ax.set_title("Outcomes per level")
    ax.legend(fontsize=8, ncols=4, loc="lower center", bbox_to_anchor=(0.5, -0.38))
    return _png(fig)


FIGURES = {
    "speedup_histogram": speedup_histogram,
    "speedup_vs_f": speedup_vs_library_fraction,
    "outcomes_per_level": outcomes_per_level,
}
