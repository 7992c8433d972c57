"""Builders for Outcome objects and tiny problem files used by the bench tests."""

from __future__ import annotations

from pathlib import Path

from kernelopt.contracts import Outcome, OutcomeCategory
from kernelopt.contracts.campaign import BudgetUse
from kernelopt.contracts.compiled import TriageResult

PROBLEM_SOURCE = '''"""A tiny problem for bench tests."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)


def get_inputs():
    return [torch.randn(4, 4)]


def get_init_inputs():
    return []
'''


def triage(f: float) -> TriageResult:
    return TriageResult(
        total_ms=1.0,
        library_ms=f,
        triton_ms=1.0 - f,
        library_fraction=f,
        ceilings={},
        required_speedup=None,
        verdict="worth_searching",
    )


def outcome(
    name: str,
    category: OutcomeCategory | str,
    speedup: float = 1.0,
    *,
    f: float | None = None,
    gpu_seconds: float = 0.0,
    tokens: int = 0,
    compile_mode: str = "max-autotune-no-cudagraphs",
    reason: str = "test",
) -> Outcome:
    return Outcome(
        campaign_id=f"c-{name}",
        problem=name,
        category=OutcomeCategory(category),
        speedup=speedup,
        reason=reason,
        compile_mode=compile_mode,
        triage=triage(f) if f is not None else None,
        used=BudgetUse(gpu_seconds=gpu_seconds, tokens=tokens),
        gpu_name="NVIDIA H200",
        torch_version="2.11.0",
        triton_version="3.6.0",
    )


def write_suite(root: Path, layout: dict[str, list[str]]) -> Path:
    """``{"level1": ["1_a", "10_b"], ...}``; the key "" writes files flat into ``root``."""
    for folder, names in layout.items():
        target = root / folder if folder else root
        target.mkdir(parents=True, exist_ok=True)
        for name in names:
            (target / f"{name}.py").write_text(PROBLEM_SOURCE)
    return root
