"""The prompt's numbers section says plainly when bandwidth cannot carry a target to gamma."""

from __future__ import annotations

import pytest

from kernelopt.agents.sections import hardware_text, numbers_text
from kernelopt.contracts.compiled import TargetKind
from kernelopt.contracts.search import Hardware, PromptFacts

H200 = Hardware(name="NVIDIA H200", bandwidth_gbs=4814.0)
FLOOR = 48_140_000  # bytes: 10 us at 4814 GB/s


def _facts(baseline_us: float, required: float) -> PromptFacts:
    return PromptFacts(
        baseline_ms=baseline_us / 1000,
        forward_ms=0.1,
        share=0.2,
        required_speedup=required,
        bytes_in=FLOOR // 2,
        bytes_out=FLOOR // 2,
    )


def test_a_target_near_its_floor_is_told_it_cannot_reach_gamma_by_bandwidth() -> None:
    # at 90% of the bandwidth (1.11x headroom), needing 1.196x: the finding's case
    text = numbers_text(_facts(11.1, 1.196), H200)
    assert "(90% of the bandwidth)" in text
    line = next(line for line in text.splitlines() if line.startswith("- bandwidth headroom"))
    assert line.startswith(
        "- bandwidth headroom 1.110x < required 1.196x: this target alone cannot reach "
        "gamma = 1.030 by using the bandwidth better"
    )
    assert "Only moving fewer bytes could: not re-reading data" in line
    assert "fusing with a neighbouring kernel's read or write" in line
    assert "A cheaper data type is NOT allowed" in line


@pytest.mark.parametrize(
    ("baseline_us", "required", "hardware"),
    [
        (137.0, 1.068, H200),  # 7% of the bandwidth: 13.7x headroom, a good target
        (11.1, 1.196, Hardware(name="unknown GPU")),  # no bandwidth: no floor time, no verdict
        (11.1, None, H200),  # too small to reach gamma alone: the required note says so
    ],
)
def test_no_headroom_line_where_bandwidth_is_not_the_limit_or_unknown(
    baseline_us: float, required: float | None, hardware: Hardware
) -> None:
    facts = _facts(baseline_us, required or 1.0).model_copy(update={"required_speedup": required})
    assert "bandwidth headroom" not in numbers_text(facts, hardware)


def test_the_whole_forward_is_not_told_to_fuse_with_a_neighbour() -> None:
    facts = _facts(10.2, 1.03).model_copy(update={"share": 1.0})
    line = numbers_text(facts, H200, TargetKind.FORWARD).splitlines()[-2]
    assert line.startswith("- bandwidth headroom 1.020x < required 1.030x: the whole forward")
    assert "neighbouring kernel" not in line and "NOT allowed" in line


def test_the_hardware_section_names_the_gpu_worker_s_versions() -> None:
    worker = H200.model_copy(update={"torch_version": "2.11.0+cu130", "triton_version": "3.6.0"})
    compiled = PromptFacts(torch_version="2.9.1", triton_version="3.5.1")
    text = hardware_text(worker, compiled)
    assert (
        text.splitlines()[-1]
        == "Software: PyTorch 2.11.0+cu130, Triton 3.6.0 (from the GPU worker)"
    )
    # no profile read them: the compile record's, still the GPU worker's, not this machine's
    line = hardware_text(H200, compiled).splitlines()[-1]
    assert line == "Software: PyTorch 2.9.1, Triton 3.5.1 (from the GPU worker's compile record)"
    assert "Software" not in hardware_text(H200, PromptFacts())  # unknown: no line at all


def test_old_payloads_without_versions_still_load() -> None:
    assert Hardware.model_validate({"name": "NVIDIA H200"}).torch_version is None
    assert PromptFacts.model_validate({"gamma": 1.03}).neighbours == []


def test_ratios_are_printed_with_three_decimals() -> None:
    text = numbers_text(_facts(137.0, 1.068), H200)
    assert "gamma = 1.030: 1.068x" in text and "at least 1.030x faster" in text
