"""The campaign's Temporal search attributes: set by whoever starts a campaign, updated by
the workflow, read by ``kernelopt list``.

Their one home is here, below the workflows, so the client side can start and list
campaigns without importing workflow code.  Imports only temporalio's common types,
which the workflow sandbox passes through like the standard library.
"""

from __future__ import annotations

from temporalio.common import SearchAttributeKey, SearchAttributePair, TypedSearchAttributes

from .campaign import CampaignPhase

SA_CAMPAIGN = SearchAttributeKey.for_keyword("KernelOptCampaign")
SA_PROBLEM = SearchAttributeKey.for_keyword("KernelOptProblem")
SA_PHASE = SearchAttributeKey.for_keyword("KernelOptPhase")
SA_OUTCOME = SearchAttributeKey.for_keyword("KernelOptOutcome")
SA_BEST = SearchAttributeKey.for_float("KernelOptBestSpeedup")


def search_attributes_for(campaign_id: str, problem: str) -> TypedSearchAttributes:
    """Attributes set when a campaign starts: ``list`` can show a campaign before it runs."""
    return TypedSearchAttributes(
        [
            SearchAttributePair(SA_CAMPAIGN, campaign_id),
            SearchAttributePair(SA_PROBLEM, problem),
            SearchAttributePair(SA_PHASE, CampaignPhase.QUEUED.value),
        ]
    )


__all__ = [
    "SA_BEST",
    "SA_CAMPAIGN",
    "SA_OUTCOME",
    "SA_PHASE",
    "SA_PROBLEM",
    "search_attributes_for",
]
