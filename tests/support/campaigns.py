"""The campaign the end-to-end and deployment tests run over the GPU doubles."""

from __future__ import annotations

from kernelopt.contracts import CampaignOptions, ProposerConfig, ProposerKind, SearchParams


def small_options(cpu_queue: str, gpu_queue: str) -> CampaignOptions:
    """Built-in proposer, few candidates, every target searched: ends in seconds."""
    return CampaignOptions(
        search=SearchParams(iterations=2, plans=2, retries=1, beam=2),
        proposer=ProposerConfig(kind=ProposerKind.BUILTIN),
        cpu_queue=cpu_queue,
        gpu_queue=gpu_queue,
        search_library_dominated=True,
    )
