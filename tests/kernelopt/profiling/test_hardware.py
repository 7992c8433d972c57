"""The hardware facts the profiling child reads name the worker's PyTorch and Triton."""

from __future__ import annotations

from types import SimpleNamespace

import torch

from kernelopt.profiling.hardware import device_hardware


def test_the_gpu_worker_s_versions_travel_with_its_hardware(monkeypatch) -> None:
    props = SimpleNamespace(
        name="NVIDIA H200", multi_processor_count=132, major=9, minor=0, L2_cache_size=2**20
    )
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda index: props)
    monkeypatch.setattr("kernelopt.profiling.hardware.device_bandwidth_gbs", lambda p: 4800.0)
    monkeypatch.setattr(torch, "__version__", "9.9.9-worker")
    hardware = device_hardware()
    assert hardware is not None
    assert hardware.torch_version == "9.9.9-worker" and hardware.triton_version
