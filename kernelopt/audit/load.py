"""Where an audit's histories come from: the server while it knows the campaign, else the export."""

from __future__ import annotations

from temporalio.client import Client
from temporalio.service import RPCError, RPCStatusCode

from kernelopt.errors import KernelOptError
from kernelopt.store import ArtifactStore, open_store

from .collect import build_report
from .export import find_export, load_histories
from .model import AuditReport
from .moves import moves_during, read_moves
from .runs import campaign_histories


class CampaignNotFound(KernelOptError):
    """Neither the server nor the artifact store knows the campaign."""


async def load_report(
    client: Client | None,
    campaign_id: str,
    store: ArtifactStore | None = None,
    prefer_export: bool = False,
) -> AuditReport:
    """The audit of ``campaign_id``: live history first, the exported copy when the server forgot it."""
    store = store or open_store()
    if client is not None and not prefer_export:
        try:
            runs = await campaign_histories(client, campaign_id)
            return _with_moves(build_report(campaign_id, runs, "live"), store)
        except RPCError as exc:
            if exc.status != RPCStatusCode.NOT_FOUND:
                raise
    found = find_export(store, campaign_id)
    if found is None:
        where = "the artifact store" if client is None else "the server or the artifact store"
        raise CampaignNotFound(
            f"campaign {campaign_id!r} is not in {where} (no history, no export under "
            "refs/campaigns/)"
        )
    ref, index = found
    report = build_report(campaign_id, load_histories(store, index), f"export {ref.short}")
    return _with_moves(report, store)


def _with_moves(report: AuditReport, store: ArtifactStore) -> AuditReport:
    """The machine losses and resumes during the campaign: they are not in its history."""
    report.moves = moves_during(read_moves(store), report.started_at, report.closed_at)
    return report


__all__ = ["CampaignNotFound", "load_report"]
