"""Where a timing child ran on the host: its CPUs, their NUMA nodes, and the GPU's node.

Launch-bound forwards spread between fresh timing processes far more than GPU-bound
ones, enough for gate 4 to quarantine their candidates (docs/TEAM_NOTES.md).  A process that lands on CPUs
far from the GPU launches more slowly, which would explain it.  Each round
records its placement, so the verdicts can confirm or refute that before
anything is pinned.  Linux-only (procfs/sysfs); elsewhere every field is None.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

_CPU_ROOT = Path("/sys/devices/system/cpu")
_PCI_ROOT = Path("/sys/bus/pci/devices")


def current_cpu(stat: str | None = None) -> int | None:
    """The CPU this process last ran on (field 39 of /proc/self/stat)."""
    try:
        text = stat if stat is not None else Path("/proc/self/stat").read_text()
        # the command name (field 2) may contain spaces: count fields after its ')'
        fields = text[text.rindex(")") + 2 :].split()
        return int(fields[36])
    except (OSError, ValueError, IndexError):
        return None


def cpu_node(cpu: int | None, root: Path = _CPU_ROOT) -> int | None:
    """The NUMA node of ``cpu`` (its ``nodeN`` link in sysfs)."""
    if cpu is None:
        return None
    try:
        nodes = [p.name for p in (root / f"cpu{cpu}").glob("node[0-9]*")]
    except OSError:
        return None
    return int(nodes[0].removeprefix("node")) if nodes else None


def pci_address(props: Any) -> str | None:
    """``dddd:bb:dd.0`` from CUDA device properties (None when torch does not expose it)."""
    bus = getattr(props, "pci_bus_id", None)
    if bus is None:
        return None
    domain = getattr(props, "pci_domain_id", 0) or 0
    device = getattr(props, "pci_device_id", 0) or 0
    return f"{domain:04x}:{bus:02x}:{device:02x}.0"


def gpu_node(address: str | None, root: Path = _PCI_ROOT) -> int | None:
    """The NUMA node sysfs gives the GPU (None when unknown or not exposed, as in many VMs)."""
    if address is None:
        return None
    try:
        node = int((root / address / "numa_node").read_text().strip())
    except (OSError, ValueError):
        return None
    return node if node >= 0 else None
