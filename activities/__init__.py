"""Activity implementations, grouped by the task queue that runs them.

Imported lazily so the CPU worker of a machine without CUDA never needs the
GPU modules' heavy imports at start, and the other way round.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def cpu_activities() -> list[Callable[..., Any]]:
    from .audit_activities import CPU_ACTIVITIES as audit_cpu
    from .compile_activities import CPU_ACTIVITIES as compile_cpu
    from .llm_wait_activities import CPU_ACTIVITIES as llm_wait_cpu
    from .report_activities import CPU_ACTIVITIES as report_cpu
    from .search_activities import CPU_ACTIVITIES as search_cpu

    return [*compile_cpu, *search_cpu, *llm_wait_cpu, *report_cpu, *audit_cpu]


def gpu_activities() -> list[Callable[..., Any]]:
    from .compile_activities import GPU_ACTIVITIES as compile_gpu
    from .gate_activities import GPU_ACTIVITIES as gate_gpu
    from .screen import GPU_ACTIVITIES as screen_gpu
    from .search_activities import GPU_ACTIVITIES as search_gpu

    return [*compile_gpu, *gate_gpu, *search_gpu, *screen_gpu]
