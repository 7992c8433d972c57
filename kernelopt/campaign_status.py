"""How a campaign's state reads to a person: cancelled vs finished, and where the report is.

The workflow ends a cancelled campaign the same way as any other (it returns the
compiler's baseline, category ``fallback``), so its status has to be told apart
from the outcome's reason; ``show``, ``list`` and the audit all ask here so they
agree.  The report is an artifact; a person wants a file they can open.
"""

from __future__ import annotations

from pathlib import Path

from kernelopt.contracts import ArtifactRef, CampaignProgress, Outcome

CANCELLED = "cancelled"


def was_cancelled(outcome: Outcome | None) -> bool:
    """True when the campaign ended because someone stopped it (``kernelopt cancel``)."""
    if outcome is None:
        return False
    return outcome.reason.startswith(CANCELLED) or outcome.stop_reason.startswith(CANCELLED)


def status_of(workflow_status: str, outcome: Outcome | None) -> str:
    """``cancelled`` for a stopped campaign, otherwise the workflow's own status."""
    if was_cancelled(outcome) or workflow_status in ("canceled", "cancelled"):
        return CANCELLED
    return workflow_status


def report_path(outcome: Outcome, home: Path) -> Path | None:
    """The campaign's Markdown report as a file under ``$KERNELOPT_HOME/reports``.

    None when the report is not in this machine's artifact store (a cluster whose
    store lives elsewhere); the caller then shows the digest instead.
    """
    return _as_file(outcome.report, outcome, home, "reports", ".md")


def model_path(outcome: Outcome, home: Path) -> Path | None:
    """The returned model as a file under ``$KERNELOPT_HOME/models`` (its form:
    ``Outcome.returned_form``); None where it is not in this machine's store."""
    return _as_file(outcome.wrapper, outcome, home, "models", ".py")


def _as_file(
    ref: ArtifactRef | None, outcome: Outcome, home: Path, folder: str, suffix: str
) -> Path | None:
    from kernelopt.store import ArtifactError, open_store

    if ref is None:
        return None
    store = open_store(home / "artifacts")
    if not store.exists(ref):
        return None
    safe = "".join(c if c.isalnum() or c in "-_." else "-" for c in outcome.campaign_id)
    try:
        return store.materialize(ref, home / folder, f"{safe}{suffix}")
    except (ArtifactError, OSError):
        return None


def _duration(seconds: float) -> str:
    """'45 s', '12 min', '3.4 h': the unit a person reads a campaign's pace in."""
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 90 * 60:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def progress_summary(p: CampaignProgress, elapsed_s: float | None = None) -> str:
    """How far a campaign is and what is left, in one line.

    At hundreds of targets a bare 'targets 12/340' says nothing about when it
    ends; the pace so far (wall and GPU seconds per finished target, the compile
    and triage before the first search included) turns the rest into an estimate.
    """
    total, done = p.targets_total, p.targets_done
    if total <= 0:
        return f"{p.phase.value}: no targets yet"
    left = max(total - done, 0)
    text = f"targets {done:,}/{total:,} done ({done / total:.0%}), {left:,} left"
    if p.current_target:
        text += f", now {p.current_target}"
    text += f"; candidates {p.candidates_tried:,} gated, {p.candidates_accepted:,} passed gates 1-2"
    wall = elapsed_s if elapsed_s is not None else p.used.wall_seconds
    if done and wall > 0:
        per_target = wall / done
        text += (
            f"; {_duration(per_target)} and {p.used.gpu_seconds / done:.0f} GPU-s per target so far"
        )
        if left:
            text += f", ~{_duration(per_target * left)} left at that pace"
    return text


__all__ = ["CANCELLED", "progress_summary", "report_path", "status_of", "was_cancelled"]
