"""The bytes-moved floor and the Amdahl requirement that triage and the prompts share."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from kernelopt.contracts.compiled import KernelArg, TensorSpec
from kernelopt.contracts.data_movement import (
    device_bandwidth_gbs,
    peak_bandwidth_gbs,
    required_speedup,
    signature_bytes,
    tensor_bytes,
)


def _arg(role: str, shape: list[int], stride: list[int], dtype: str = "torch.float32") -> KernelArg:
    return KernelArg(
        name=role, tensor=TensorSpec(shape=shape, stride=stride, dtype=dtype), role=role
    )


def test_peak_bandwidth_from_the_memory_clock_and_bus() -> None:
    assert peak_bandwidth_gbs(2_619_000, 6144) == 2.0 * 2_619_000e3 * 768 / 1e9
    assert peak_bandwidth_gbs(None, 6144) is None
    # triage and the prompts' hardware read it from the same device properties
    props = SimpleNamespace(memory_clock_rate=2_619_000, memory_bus_width=6144)
    assert device_bandwidth_gbs(props) == peak_bandwidth_gbs(2_619_000, 6144)
    assert device_bandwidth_gbs(SimpleNamespace(name="an older torch")) is None


def test_a_broadcast_counts_once_and_roles_split_reads_from_writes() -> None:
    assert tensor_bytes(TensorSpec(shape=[4, 8], stride=[0, 1], dtype="torch.float16")) == 16
    assert tensor_bytes(TensorSpec(shape=[0, 8], stride=[8, 1], dtype="float32")) == 0
    args = [_arg("in", [4, 8], [8, 1]), _arg("inout", [8], [1]), _arg("out", [4], [1])]
    args.append(KernelArg(name="n", value=32, role="scalar"))
    assert signature_bytes(args) == (128 + 32, 32 + 16)


def test_required_speedup_is_amdahl_on_the_targets_share() -> None:
    assert required_speedup(1.0, 1.03) == pytest.approx(1.03)
    assert required_speedup(0.5, 1.03) == pytest.approx(0.5 / (1 / 1.03 - 0.5))
    assert required_speedup(0.02, 1.03) is None  # even infinitely fast: under gamma
    assert required_speedup(0.0, 1.03) is None
