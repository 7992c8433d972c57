"""CPU activities of ExportCampaign: list a closed campaign's runs, write the export index.

Thin wrappers over ``kernelopt.audit``; ``export_history`` (report_activities)
copies each run's history.  Listing waits, heartbeating, until the campaign's
last run has closed: only then is its history complete.
"""

from __future__ import annotations

from temporalio import activity

from kernelopt.audit.export import write_index
from kernelopt.audit.runs import list_runs, wait_closed
from kernelopt.contracts.audit import (
    LIST_CAMPAIGN_RUNS,
    WRITE_EXPORT_INDEX,
    CampaignRuns,
    CampaignRunsInput,
    ExportIndexInput,
    ExportIndexResult,
)
from kernelopt.store import open_store

from .heartbeat import heartbeating, in_thread


@activity.defn(name=LIST_CAMPAIGN_RUNS)
async def list_campaign_runs(inp: CampaignRunsInput) -> CampaignRuns:
    client = activity.client()
    if inp.wait_closed:
        await wait_closed(client, inp.workflow_id, inp.poll_s, heartbeat=activity.heartbeat)
    async with heartbeating():
        return await list_runs(client, inp.workflow_id, inp.first_run_id)


@activity.defn(name=WRITE_EXPORT_INDEX)
async def write_export_index(inp: ExportIndexInput) -> ExportIndexResult:
    return await in_thread(write_index, open_store(), inp)


CPU_ACTIVITIES = [list_campaign_runs, write_export_index]
