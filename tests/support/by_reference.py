"""What the by-reference tests share: payload sizes and one synthetic model, stored.

The segment, triage and scope tests each measure how big Temporal payloads grow
with the model; one definition keeps their numbers comparable.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from temporalio.contrib.pydantic import pydantic_data_converter

from kernelopt.compile.segment import build_segment
from kernelopt.compile.segment_store import store_segment
from kernelopt.compile.triage import summarize
from kernelopt.compile.triage_store import store_triage
from kernelopt.compile.wrapper_parse import parse_wrapper
from kernelopt.contracts import (
    CompileResult,
    KernelTiming,
    PlanTargetsInput,
    SearchKernelInput,
    SearchMode,
    SegmentRef,
    SegmentResult,
    TargetPlan,
    TargetScope,
    TargetScopeInput,
    TriageRef,
    TriageResult,
)
from kernelopt.store import ArtifactStore, open_store
from tests.support.synthetic_wrapper import synthetic_wrapper
from tests.support.wrappers import fixture_json

KIB = 1024
SMALL, LARGE = 10, 300
BUILTIN = {"builtin_kernels": True, "skip_fusion_groups": True, "rewrites_first": True}


def payload_size(value: object) -> int:
    """``value``'s size as Temporal's pydantic data converter encodes it."""
    return pydantic_data_converter.payload_converter.to_payloads([value])[0].ByteSize()


class Model:
    """One synthetic model, its segmentation and triage, stored as a campaign stores them."""

    def __init__(self, n: int, store: ArtifactStore, compiled: CompileResult) -> None:
        self.segment: SegmentResult = build_segment(
            parse_wrapper(synthetic_wrapper(n)), store, SearchMode.MULTI
        )
        times = [  # a long tail: most kernels fall below triage's cut-off
            KernelTiming(name=k.name, ms=1.0 / (i + 1), is_library=False)
            for i, k in enumerate(self.segment.kernels)
        ]
        times.append(KernelTiming(name="extern_kernels.mm", ms=2.0, is_library=True))
        self.triage: TriageResult = summarize(times, self.segment.targets, self.segment.mode)
        self.segment_ref: SegmentRef = store_segment(self.segment, store)
        self.triage_ref: TriageRef = store_triage(self.triage, store)
        self.compiled = compiled

    def plan_input(self, **flags: object) -> PlanTargetsInput:
        return PlanTargetsInput(
            compiled=self.compiled, segment=self.segment_ref, triage=self.triage_ref, **flags
        )

    def scope_input(self, plan: TargetPlan, index: int) -> TargetScopeInput:
        return TargetScopeInput(
            compiled=self.compiled,
            segment=self.segment_ref,
            triage=self.triage_ref,
            plan=plan,
            index=index,
        )

    def search_input(self, scope: TargetScope) -> SearchKernelInput:
        """The search's input for the target ``scope`` holds, as the campaign starts it."""
        return SearchKernelInput(
            campaign_id="c",
            compiled=self.compiled,
            segment=scope.segment,
            scope=scope.scope,
            target=scope.target,
            gpu_queue="g",
            cpu_queue="c",
            facts=scope.facts,
        )


def home_store(home: Path) -> ArtifactStore:
    """The artifact store under ``home``: the one the activities open with KERNELOPT_HOME=home."""
    return open_store(home / "artifacts")


def stored_models(store: ArtifactStore) -> dict[int, Model]:
    """The small and the large synthetic model, stored in ``store``."""
    compiled = CompileResult.model_validate(fixture_json("level3_002_transformer_block", "compile"))
    return {n: Model(n, store, compiled) for n in (SMALL, LARGE)}


def module_fixtures(folder: str) -> tuple[Any, Any, Any]:
    """A test module's ``home``, ``store`` and ``models`` fixtures, one of each per module.

    ``home`` is a fresh folder named after ``folder``, the store is under it and the small
    and large synthetic models are stored there: ``home, store, models = module_fixtures(...)``.
    """

    @pytest.fixture(scope="module", name="home")
    def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
        return tmp_path_factory.mktemp(folder)

    store = pytest.fixture(home_store, scope="module", name="store")
    models = pytest.fixture(stored_models, scope="module", name="models")
    return home, store, models
