"""``kernelopt audit``: every candidate of a campaign, its lineage, gates and final decision.

Reads the campaign's Temporal histories (live, or the export in the artifact
store once the server's retention window has passed) and prints a terminal
table, JSON, or a self-contained HTML report with plots.
"""

from __future__ import annotations

from .load import CampaignNotFound, load_report
from .model import AuditReport

__all__ = ["AuditReport", "CampaignNotFound", "load_report"]
