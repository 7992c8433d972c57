"""How a campaign's state reads to a person: cancelled vs finished, and where the report is.

The workflow ends a cancelled campaign the same way as any other (it returns the
compiler's baseline, category ``fallback``), so its status has to be told apart
from the outcome's reason; ``show``, ``list`` and the audit all ask here so they
agree.  The report is an artifact; a person wants a file they can open.
"""

from __future__ import annotations

from pathlib import Path

from kernelopt.contracts import Outcome

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
    from kernelopt.store import ArtifactError, open_store

    if outcome.report is None:
        return None
    store = open_store(home / "artifacts")
    if not store.exists(outcome.report):
        return None
    safe = "".join(c if c.isalnum() or c in "-_." else "-" for c in outcome.campaign_id)
    try:
        return store.materialize(outcome.report, home / "reports", f"{safe}.md")
    except (ArtifactError, OSError):
        return None


__all__ = ["CANCELLED", "report_path", "status_of", "was_cancelled"]
