"""The GPU's facts for the prompts, read where the GPU is (the profiling child).

Only this child touches CUDA; without it (CPU machines) the answer is None
and the prompts fall back to ``agents.facts.stand_in_hardware``.
"""

from __future__ import annotations

from kernelopt.contracts.data_movement import device_bandwidth_gbs
from kernelopt.contracts.search import Hardware


def device_hardware(index: int = 0) -> Hardware | None:
    """Hardware of CUDA device ``index``; None without CUDA."""
    import torch

    if not torch.cuda.is_available():
        return None
    props = torch.cuda.get_device_properties(index)
    l2 = getattr(props, "L2_cache_size", None)
    return Hardware(
        name=props.name,
        sm_count=props.multi_processor_count,
        bandwidth_gbs=device_bandwidth_gbs(props),
        l2_bytes=int(l2) if l2 else None,
        compute_capability=f"{props.major}.{props.minor}",
        source="device: torch.cuda.get_device_properties on the GPU worker",
        torch_version=torch.__version__,
        triton_version=_triton_version(),
    )


def _triton_version() -> str | None:
    """Triton's version where it is installed (the worker that runs candidates has it)."""
    try:
        import triton
    except ImportError:
        return None
    return str(triton.__version__)
