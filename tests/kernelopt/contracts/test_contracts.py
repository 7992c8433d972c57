import subprocess
import sys

import pytest
from temporalio.contrib.pydantic import pydantic_data_converter

from kernelopt.contracts import (
    ArtifactRef,
    Budgets,
    BudgetUse,
    CampaignInput,
    CampaignOptions,
    ProblemSpec,
    Usage,
    names,
)
from tests.support.paths import ROOT


def test_importing_workflows_loads_no_torch_triton_numpy() -> None:
    code = (
        "import sys, workflows, workflows.optimize_model, workflows.search_kernel, "
        "workflows.activity_options, kernelopt.contracts;"
        "bad = sorted(m for m in ('torch', 'triton', 'numpy') if m in sys.modules);"
        "print(','.join(bad))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == ""


def test_campaign_input_roundtrips_through_the_data_converter() -> None:
    ref = ArtifactRef(sha256="0" * 64, size=3, name="p.py")
    inp = CampaignInput(
        campaign_id="c1",
        problem=ProblemSpec(name="p", source=ref),
        options=CampaignOptions(budgets=Budgets(max_tokens=10)),
    )
    payloads = pydantic_data_converter.payload_converter.to_payloads([inp])
    (back,) = pydantic_data_converter.payload_converter.from_payloads(payloads, [CampaignInput])
    assert back == inp


def test_budget_use_reports_the_first_exceeded_budget() -> None:
    used = BudgetUse()
    used.add(Usage(prompt_tokens=6, completion_tokens=5, usd=0.5), gpu_seconds=3)
    assert used.exceeded(Budgets()) is None
    assert used.exceeded(Budgets(max_tokens=11)) == "tokens"
    assert used.exceeded(Budgets(max_tokens=12, max_gpu_seconds=2)) == "gpu_seconds"


def test_gpu_queue_is_named_by_model() -> None:
    assert names.gpu_queue_for("NVIDIA H200") == "kernelopt-gpu-nvidia-h200"
    assert names.gpu_queue_for("NVIDIA A100-SXM4-80GB") == "kernelopt-gpu-nvidia-a100-sxm4-80gb"


def test_a_campaign_can_shorten_the_gpu_heartbeat_timeout() -> None:
    from datetime import timedelta

    import pydantic

    from kernelopt.contracts import CampaignOptions
    from workflows import activity_options as opts

    shorter = opts.GATE_CANDIDATE.with_heartbeat(15)
    assert shorter.kwargs()["heartbeat_timeout"] == timedelta(seconds=15)
    assert shorter.start_to_close == opts.GATE_CANDIDATE.start_to_close
    assert shorter.retry.maximum_attempts == opts.GATE_CANDIDATE.retry.maximum_attempts
    assert opts.GATE_CANDIDATE.with_heartbeat(None) is opts.GATE_CANDIDATE
    # a CPU call site keeps its own heartbeat timeout (issue 25: CPU activities heartbeat too)
    assert opts.SEGMENT.with_heartbeat(15).kwargs()["heartbeat_timeout"] == opts.CPU_HEARTBEAT
    for too_short in (1, 8):  # GPU children heartbeat every 5 s: below 10 s live work dies
        with pytest.raises(pydantic.ValidationError):
            CampaignOptions(gpu_queue="g", cpu_queue="c", gpu_heartbeat_s=too_short)
    assert CampaignOptions(gpu_queue="g", cpu_queue="c", gpu_heartbeat_s=10).gpu_heartbeat_s == 10
