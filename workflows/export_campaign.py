"""ExportCampaign: copy a closed campaign's histories into the artifact store.

Started by the campaign's last run just before it returns, with
``ParentClosePolicy.ABANDON`` so it outlives its parent.  It waits until the
campaign has closed (its history is only complete then), lists every run of
the campaign and of its SearchKernel children, exports each run's history
JSON with the ``export_history`` activity, and writes one index artifact plus
a named pointer, so ``kernelopt audit`` works after the server's retention
window.  Deterministic: three kinds of activity in a fixed order, one id per
campaign (``<campaign>/export``), so starting it twice is harmless.
"""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ApplicationError, ChildWorkflowError, WorkflowAlreadyStartedError

with workflow.unsafe.imports_passed_through():
    from kernelopt.contracts import ExportInput, ExportResult, names
    from kernelopt.contracts.audit import (
        EXPORT_CAMPAIGN,
        LIST_CAMPAIGN_RUNS,
        WRITE_EXPORT_INDEX,
        CampaignRuns,
        CampaignRunsInput,
        ExportCampaignInput,
        ExportedRun,
        ExportIndexInput,
        ExportIndexResult,
    )

_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=2),
    backoff_coefficient=2.0,
    maximum_interval=timedelta(minutes=2),
    maximum_attempts=10,
)
# The export activities heartbeat (``activities.heartbeat``): a dead worker is noticed in 30 s.
_HEARTBEAT = timedelta(seconds=30)


def export_workflow_id(campaign_workflow_id: str) -> str:
    return f"{campaign_workflow_id}/export"


@workflow.defn(name=EXPORT_CAMPAIGN)
class ExportCampaign:
    @workflow.run
    async def run(self, inp: ExportCampaignInput) -> ExportIndexResult:
        runs: CampaignRuns = await workflow.execute_activity(
            LIST_CAMPAIGN_RUNS,
            CampaignRunsInput(
                workflow_id=inp.workflow_id,
                first_run_id=inp.first_run_id,
                wait_closed=True,
                poll_s=inp.poll_s,
            ),
            task_queue=inp.cpu_queue,
            result_type=CampaignRuns,
            # waiting for the campaign to close can take a while; heartbeats prove we are alive
            start_to_close_timeout=timedelta(hours=24),
            heartbeat_timeout=timedelta(minutes=1),
            retry_policy=_RETRY,
        )
        if not runs.runs:
            raise ApplicationError(
                f"campaign {inp.workflow_id} has no runs to export", non_retryable=True
            )
        exported: list[ExportedRun] = []
        for run in runs.runs:
            result: ExportResult = await workflow.execute_activity(
                names.EXPORT_HISTORY,
                ExportInput(
                    campaign_id=inp.campaign_id, workflow_id=run.workflow_id, run_id=run.run_id
                ),
                task_queue=inp.cpu_queue,
                result_type=ExportResult,
                start_to_close_timeout=timedelta(minutes=10),
                heartbeat_timeout=_HEARTBEAT,
                retry_policy=_RETRY,
            )
            exported.append(ExportedRun(run=run, history=result.history))
        return await workflow.execute_activity(
            WRITE_EXPORT_INDEX,
            ExportIndexInput(campaign_id=inp.campaign_id, status=runs.status, exported=exported),
            task_queue=inp.cpu_queue,
            result_type=ExportIndexResult,
            start_to_close_timeout=timedelta(minutes=10),
            heartbeat_timeout=_HEARTBEAT,
            retry_policy=_RETRY,
        )


async def start_export(campaign_id: str, cpu_queue: str) -> None:
    """Called by a campaign's last run just before it returns; never fails the campaign.

    The export is abandoned by its parent on purpose: it must keep running
    after the campaign closes, which is exactly what it waits for.
    """
    info = workflow.info()
    try:
        await workflow.start_child_workflow(
            EXPORT_CAMPAIGN,
            ExportCampaignInput(
                campaign_id=campaign_id,
                workflow_id=info.workflow_id,
                cpu_queue=cpu_queue,
                first_run_id=info.first_execution_run_id,
            ),
            id=export_workflow_id(info.workflow_id),
            task_queue=cpu_queue,
            parent_close_policy=workflow.ParentClosePolicy.ABANDON,
        )
    except (WorkflowAlreadyStartedError, ChildWorkflowError) as exc:
        # diagnostics never fail a run: the audit can still read the live history
        workflow.logger.warning("history export of %s not started: %s", campaign_id, exc)


__all__ = ["ExportCampaign", "export_workflow_id", "start_export"]
