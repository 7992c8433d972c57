"""Deterministic orchestration only: imports the standard library, temporalio and
kernelopt.contracts -- never torch, triton or numpy (a test checks)."""

from __future__ import annotations


def all_workflows() -> list[type]:
    from .export_campaign import ExportCampaign
    from .optimize_model import OptimizeModel
    from .search_kernel import SearchKernel

    return [OptimizeModel, SearchKernel, ExportCampaign]
