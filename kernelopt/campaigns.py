"""Submitting and steering campaigns: the one API the CLI, bench runner and tests share."""

from __future__ import annotations

import uuid
from pathlib import Path

from temporalio.client import Client, WorkflowHandle
from temporalio.common import WorkflowIDReusePolicy

from kernelopt.config import Settings
from kernelopt.contracts import (
    CampaignInput,
    CampaignOptions,
    Outcome,
    ProblemSpec,
    names,
)
from kernelopt.contracts.names import gpu_queue_for
from kernelopt.contracts.search_attributes import search_attributes_for
from kernelopt.contracts.verdicts import GateSettings
from kernelopt.errors import ProblemError
from kernelopt.gpu_info import gpu_names
from kernelopt.store import ArtifactStore

DEFAULT_GPU_MODEL = "NVIDIA H200"


def default_gpu_queue(settings: Settings) -> str:
    """The GPU queue campaigns target: configured, else this machine's GPU, else the default model."""
    if settings.gpu_queue:
        return settings.gpu_queue
    if settings.gpu_model:
        return gpu_queue_for(settings.gpu_model)
    local = gpu_names()
    return gpu_queue_for(local[0] if local else DEFAULT_GPU_MODEL)


def prepare_problem(
    path: Path, store: ArtifactStore, seed: int = 0, level: int | None = None
) -> ProblemSpec:
    """Validate a problem file cheaply (no torch import) and put its source in the store."""
    from kernelopt.file_checks import require_file

    path = require_file(path, "problem")
    from kernelopt.pyfile import read_source

    try:
        source = read_source(path)
    except (OSError, UnicodeDecodeError, SyntaxError) as exc:
        raise ProblemError(str(path), f"cannot read: {exc}") from exc
    from kernelopt.kinds.registry import kind_for

    kind = kind_for(source)
    kind.check_source(source, str(path))  # each kind's text checks (helion installed, ...)
    ref = store.put_text(source, "text/x-python", path.name)
    return ProblemSpec(
        name=path.stem, kind=kind.kind, source=ref, path=str(path.resolve()), seed=seed, level=level
    )


def new_campaign_id(problem: ProblemSpec) -> str:
    safe = "".join(c if c.isalnum() or c in "-_" else "-" for c in problem.name)[:40]
    return f"{safe}-{uuid.uuid4().hex[:8]}"


async def start_campaign(
    client: Client,
    problem: ProblemSpec,
    options: CampaignOptions,
    campaign_id: str | None = None,
    search_attributes: bool = True,
) -> WorkflowHandle:
    campaign_id = campaign_id or new_campaign_id(problem)
    if options.gates is None:  # pinned now: later default changes leave this campaign alone
        options = options.model_copy(update={"gates": GateSettings()})
    kwargs = {}
    if search_attributes:
        kwargs["search_attributes"] = search_attributes_for(campaign_id, problem.name)
    return await client.start_workflow(
        names.OPTIMIZE_MODEL,
        CampaignInput(campaign_id=campaign_id, problem=problem, options=options),
        id=campaign_id,
        task_queue=options.cpu_queue,
        id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE,
        result_type=Outcome,
        **kwargs,
    )
