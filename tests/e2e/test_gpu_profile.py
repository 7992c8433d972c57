"""Issue 29 point 5 on the GPU: a whole-model target is profiled on its dominant kernel.

    source scripts/device_env.sh; source scripts/device_bwrap.sh
    python3 -m pytest -m gpu -q -p no:cacheprovider tests/e2e/test_gpu_profile.py -x

(carry ``[".device"]``: the profiler's harness and ncu run in the gate sandbox,
which needs bubblewrap.)  The committed H200 transformer block (11 Triton kernels, the
first a small layer norm) is rehydrated, segmented as a single-mode campaign does (one
forward target holding every kernel), triaged by the product's ``triage``, and profiled
by ``profile_target`` with the kernel times a campaign passes; the kernel Nsight Compute
actually measured is read back from the stored report.  The CPU half, on the committed
triage, is in tests/kernelopt/profiling/test_dominant.py; the shared steps in
``tests.support.dominant``.

Device time (one H200, ~100-140 s): rehydration ~10-20 s (the wrapper's kernels compile),
triage ~20-30 s, the event timing of the captured harness ~10-15 s (a fresh sandboxed
interpreter), one ncu ``--set full`` run ~50-60 s, and reading its report back ~5 s.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from kernelopt.store import ArtifactStore
from tests.support import dominant as block

# ``profiling.profile._profile``'s note of an ncu profile: "...; ncu 52 s on NAME; events ..."
NCU_NOTE = re.compile(r"; ncu \d+ s on (?P<kernel>.+?); events median")


def _sandbox_or_fail() -> None:
    """The profiler runs its harness only in the gate sandbox: without bubblewrap every
    harness fails and the profile is "none", so say why now, before ~40 s of GPU work."""
    from gates import sandbox

    if not sandbox.enabled():
        return
    try:
        sandbox.require()
    except sandbox.SandboxUnavailable as exc:
        pytest.fail(f"no sandbox (source scripts/device_bwrap.sh, .device carried): {exc}")


def _ncu_report_kernel(report: Path) -> tuple[str, str]:
    """(kernel name, error) of the first kernel in an ``.ncu-rep``, from its raw page: the
    kernel Nsight Compute measured, whatever the profile's note says."""
    from kernelopt.profiling.distill import distill_raw_csv
    from kernelopt.profiling.ncu import find_ncu

    ncu = find_ncu()
    if ncu is None:
        return "", "ncu not found to read the report back"
    command = [ncu, "--import", str(report), "--page", "raw", "--csv", "--print-units", "base"]
    proc = subprocess.run(command, capture_output=True, text=True, timeout=180, check=False)
    if proc.returncode != 0:
        return "", f"ncu --import failed ({proc.returncode}): {proc.stderr.strip()[-300:]}"
    return distill_raw_csv(proc.stdout).kernel_name, ""


def _device_properties() -> dict[str, object]:
    """The raw CUDA properties ``profiling.hardware`` reads, for the record."""
    import torch

    props = torch.cuda.get_device_properties(0)
    names = ("name", "multi_processor_count", "L2_cache_size", "memory_clock_rate")
    return {n: getattr(props, n, None) for n in (*names, "memory_bus_width")}


@pytest.mark.gpu
def test_whole_model_profile_is_of_its_dominant_kernel(
    gpu_store: ArtifactStore, tmp_path: Path, record: Callable[..., None]
) -> None:
    """The forward target of a multi-kernel model is profiled on the kernel with the most
    measured GPU time (not its first launch), ncu's report is of that kernel, the GPU
    worker's hardware facts are read, and the executor's prompt names that kernel as the
    dominant one and as the kernel profiled."""
    from kernelopt.compile.rehydrate import rehydrate
    from kernelopt.compile.triage import triage
    from kernelopt.contracts.compiled import TriageInput
    from kernelopt.profiling.dominant import dominant_kernel
    from kernelopt.profiling.ncu import find_ncu
    from kernelopt.profiling.profile import profile_target

    _sandbox_or_fail()
    compiled = rehydrate(block.recorded(), block.PROBLEM.read_text(), block.wrapper(), gpu_store)
    seg, forward = block.forward_target(compiled, gpu_store)
    measured = triage(TriageInput(compiled=compiled, segment=seg), gpu_store)
    facts, times = block.facts_and_times(compiled, seg, forward, measured)
    dominant, why = dominant_kernel(forward.kernels, times)
    first = forward.kernels[0]
    row: dict[str, object] = {
        "fixture": block.FIXTURE,
        "kernels": forward.kernels,
        "kernel_us": {k: round(times[k] * 1000, 3) for k in forward.kernels if k in times},
        "triage_method": measured.method[:40],
        "dominant": dominant,
        "why": why,
        "first": first,
        "first_is_dominant": dominant == first,
        "properties": _device_properties(),
    }
    record("profile_dominant", step="triage", **row)
    assert set(times) == set(forward.kernels), "kernel times not keyed by the target's kernels"
    assert dominant and dominant == facts.dominant_kernel

    result = profile_target(
        block.root_profile_input(compiled, seg, forward, times, timeout_s=300), gpu_store
    )
    profile = result.profile
    note_kernel = NCU_NOTE.search(profile.note)
    ncu_kernel, ncu_error = "", ""
    if profile.source == "ncu" and profile.raw_report is not None:
        report = gpu_store.materialize(profile.raw_report, tmp_path, "profile.ncu-rep")
        ncu_kernel, ncu_error = _ncu_report_kernel(report)
    hardware = result.hardware
    row.update(
        profile=profile.model_dump(mode="json", exclude={"raw_report"}),
        ncu_found=find_ncu() is not None,
        ncu_note_kernel=note_kernel.group("kernel") if note_kernel else "",
        ncu_report_kernel=ncu_kernel,
        ncu_report_error=ncu_error,
        hardware=hardware.model_dump(mode="json") if hardware else None,
        gpu_seconds=round(result.gpu_seconds, 1),
    )
    record("profile_dominant", step="profile", **row)

    assert profile.source != "none", profile.note
    assert "captured harness" in profile.note, profile.note  # the root's own kernel objects
    assert profile.kernel == dominant, (profile.kernel, dominant)
    assert profile.kernel_note == why
    if dominant != first:
        assert profile.kernel != first
    else:  # the first kernel measured the most: the note still says it was chosen by time
        assert profile.kernel_note.startswith("dominant kernel:"), profile.kernel_note
    if row["ncu_found"]:  # the real check: Nsight Compute measured that kernel, no other
        assert profile.source == "ncu", profile.note
        assert note_kernel is not None and note_kernel.group("kernel") == dominant, profile.note
        assert ncu_kernel == dominant, (ncu_kernel, ncu_error)

    assert hardware is not None
    assert hardware.name
    assert hardware.sm_count and hardware.sm_count > 0
    assert hardware.bandwidth_gbs and hardware.bandwidth_gbs > 1000, row["properties"]
    assert hardware.l2_bytes and hardware.l2_bytes > 0
    assert hardware.source.startswith("device")

    text = block.executor_text(forward, facts, result, gpu_store)
    lines = block.check_prompt(text, dominant, why)
    assert f"{hardware.sm_count} SMs" in text and hardware.name in text  # the worker's facts
    record("profile_dominant", step="prompt", fixture=block.FIXTURE, prompt_lines=lines)
