"""Export of closed campaigns: what ExportCampaign and its activities exchange.

A campaign's Temporal history is its audit trail, but a server keeps it only
for the namespace's retention window.  When a campaign closes, the
ExportCampaign workflow copies every run's history (the campaign's own runs,
continue-as-new included, and every SearchKernel child's runs) into the
artifact store and writes one index artifact that names them all, plus every
artifact the decisions reference.  ``kernelopt audit`` reads that index when
the server no longer knows the campaign.
"""

from __future__ import annotations

from pydantic import Field

from .base import ArtifactRef, Frozen

# wire names (workflow + activities of the export; the campaign's own names are in names.py)
EXPORT_CAMPAIGN = "ExportCampaign"
LIST_CAMPAIGN_RUNS = "list_campaign_runs"
WRITE_EXPORT_INDEX = "write_export_index"
EXPORT_PATCH = "export-campaign-history"  # workflow.patched() id guarding the export start

EXPORT_FORMAT = "kernelopt-export/1"


class ExportCampaignInput(Frozen):
    """Start ExportCampaign for a campaign (the campaign's last run does, at its end)."""

    campaign_id: str
    workflow_id: str  # the campaign's workflow id (today the same as campaign_id)
    cpu_queue: str = "kernelopt-cpu"
    first_run_id: str | None = None  # lets the export skip a walk back through the runs
    poll_s: float = 2.0  # how often to look whether the campaign has closed


class CampaignRunsInput(Frozen):
    workflow_id: str
    first_run_id: str | None = None
    wait_closed: bool = True  # block (heartbeating) until the campaign's last run closed
    poll_s: float = 2.0


class WorkflowRun(Frozen):
    """One run of one workflow execution (continue-as-new starts a new run)."""

    workflow_id: str
    run_id: str
    workflow_type: str
    status: str = ""  # completed / continued_as_new / failed / cancelled / terminated / running ...
    parent_workflow_id: str | None = None
    events: int = 0


class CampaignRuns(Frozen):
    """Every run of a campaign, in order: its own runs first, then each child's runs."""

    campaign_id: str
    runs: list[WorkflowRun] = Field(default_factory=list)
    closed: bool = False
    status: str = ""  # the campaign's final status


class ExportedRun(Frozen):
    run: WorkflowRun
    history: ArtifactRef


class ExportIndexInput(Frozen):
    campaign_id: str
    status: str = ""
    exported: list[ExportedRun] = Field(default_factory=list)


class ExportIndex(Frozen):
    """The export of one campaign (stored as an artifact; a named pointer finds it)."""

    format: str = EXPORT_FORMAT
    campaign_id: str
    status: str = ""
    exported_at: str = ""
    runs: list[ExportedRun] = Field(default_factory=list)
    artifacts: list[ArtifactRef] = Field(default_factory=list)  # referenced and present
    missing: list[str] = Field(default_factory=list)  # referenced sha256s the store lacks


class ExportIndexResult(Frozen):
    index: ArtifactRef
    runs: int = 0
    artifacts: int = 0
    missing: int = 0


__all__ = [
    "EXPORT_CAMPAIGN",
    "EXPORT_FORMAT",
    "EXPORT_PATCH",
    "LIST_CAMPAIGN_RUNS",
    "WRITE_EXPORT_INDEX",
    "CampaignRuns",
    "CampaignRunsInput",
    "ExportCampaignInput",
    "ExportIndex",
    "ExportIndexInput",
    "ExportIndexResult",
    "ExportedRun",
    "WorkflowRun",
]
