"""Timing rounds record where they ran (gates.placement), parsed from procfs/sysfs."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from gates.placement import cpu_node, current_cpu, gpu_node, pci_address


def _stat(cpu: int, comm: str = "python3") -> str:
    fields = ["S", *[str(i) for i in range(4, 39)], str(cpu), *["0"] * 13]
    return f"4242 ({comm}) " + " ".join(fields)


def test_current_cpu_reads_field_39_even_with_spaces_in_the_command_name() -> None:
    assert current_cpu(_stat(17)) == 17
    assert current_cpu(_stat(3, comm="a) b (c")) == 3
    assert current_cpu("garbage") is None


def test_current_cpu_of_this_process_is_a_cpu_it_may_run_on() -> None:
    import os

    cpu = current_cpu()
    if Path("/proc/self/stat").exists():
        assert cpu is not None and cpu in os.sched_getaffinity(0)


def test_cpu_node_follows_the_sysfs_node_link(tmp_path: Path) -> None:
    (tmp_path / "cpu5" / "node1").mkdir(parents=True)
    (tmp_path / "cpu6").mkdir()
    assert cpu_node(5, tmp_path) == 1
    assert cpu_node(6, tmp_path) is None  # no NUMA information exposed
    assert cpu_node(None, tmp_path) is None


def test_gpu_node_from_the_pci_address(tmp_path: Path) -> None:
    props = SimpleNamespace(pci_domain_id=0, pci_bus_id=0x1B, pci_device_id=0)
    address = pci_address(props)
    assert address == "0000:1b:00.0"
    (tmp_path / address).mkdir()
    (tmp_path / address / "numa_node").write_text("1\n")
    assert gpu_node(address, tmp_path) == 1
    (tmp_path / address / "numa_node").write_text("-1\n")  # VMs often hide the topology
    assert gpu_node(address, tmp_path) is None
    assert pci_address(SimpleNamespace()) is None and gpu_node(None, tmp_path) is None
