"""The profile activity runs the beam's best state (candidate code) with the worker's compiler
caches writable: whatever it rewrote there is dropped before any later timing loads it."""

from __future__ import annotations

import asyncio
import time
from concurrent.futures import ThreadPoolExecutor
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
        # the loop's default threads are busy with other work meanwhile
        asyncio.get_running_loop().run_in_executor(None, time.sleep, 0.3)
        return "profiled"

    monkeypatch.setattr(search_activities, "resolve_scope", scope)
    monkeypatch.setattr(search_activities, "run_supervised", profiled)

    async def profile() -> Any:
        # a guard keeps its window per thread: arm and check must not land on two of these
        asyncio.get_running_loop().set_default_executor(ThreadPoolExecutor(max_workers=8))
        return await search_activities.profile(SimpleNamespace(timeout_s=1.0))  # type: ignore[arg-type]

    done = asyncio.run(profile())
    assert done == "profiled"
    assert not kernel.exists()  # regenerates from source before any timing loads it
