"""The profile activity runs the beam's best state (candidate code) with the worker's compiler
caches writable: whatever it rewrote there is dropped before any later timing loads it."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

import activities.search_activities as search_activities


def test_a_cache_file_rewritten_while_profiling_is_dropped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    triton, inductor = tmp_path / "triton", tmp_path / "inductor"
    kernel = triton / "ab" / "k.cubin"
    kernel.parent.mkdir(parents=True)
    kernel.write_bytes(b"the baseline's kernel")
    inductor.mkdir()
    time.sleep(0.05)  # file times tick coarsely
    monkeypatch.setenv("TRITON_CACHE_DIR", str(triton))
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(inductor))

    async def scope(inp: Any) -> Any:
        return inp

    async def profiled(target: str, inp: Any, result_type: Any, **_: Any) -> str:
        assert target == "kernelopt.profiling.profile:profile_target"
        kernel.write_bytes(b"a slow kernel")  # what a hostile state does while profiled
        return "profiled"

    monkeypatch.setattr(search_activities, "resolve_scope", scope)
    monkeypatch.setattr(search_activities, "run_supervised", profiled)
    done = asyncio.run(search_activities.profile(SimpleNamespace(timeout_s=1.0)))  # type: ignore[arg-type]
    assert done == "profiled"
    assert not kernel.exists()  # regenerates from source before any timing loads it
