"""The campaign the deployment tests run: small, built-in proposer, every target searched."""

from __future__ import annotations

from kernelopt.contracts import CampaignOptions, ProposerConfig, ProposerKind, SearchParams
from tests.deploy.procs import ROOT

PROBLEM = ROOT / "problems" / "level1" / "001_relu_chain.py"


def small_campaign(cpu_queue: str, gpu_queue: str) -> CampaignOptions:
    """Few candidates, so a campaign over the GPU doubles ends in seconds."""
    return CampaignOptions(
        search=SearchParams(iterations=2, plans=2, retries=1, beam=2),
        proposer=ProposerConfig(kind=ProposerKind.BUILTIN),
        cpu_queue=cpu_queue,
        gpu_queue=gpu_queue,
        search_library_dominated=True,
    )
