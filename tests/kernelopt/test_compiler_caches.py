"""Each GPU worker's compiler caches are its own, so another worker's writes are not a
candidate's."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

import worker
from gates.cache_guard import CacheGuard, compiler_cache_dirs, local_digests
from kernelopt.compiler_caches import isolate_compiler_caches, worker_cache_dirs
from kernelopt.config import Settings


def test_two_workers_on_one_host_never_share_a_cache_directory(tmp_path: Path) -> None:
    first = worker_cache_dirs(tmp_path, "node-1", "0")
    second = worker_cache_dirs(tmp_path, "node-1", "1")
    other_host = worker_cache_dirs(tmp_path, "node-2", "0")
    dirs = [*first, *second, *other_host]
    assert len(set(dirs)) == 6
    assert all(d.parent.parent == tmp_path for d in dirs)
    # a UUID from CUDA_VISIBLE_DEVICES or an odd host name stays one path component
    triton, _ = worker_cache_dirs(tmp_path, "a/b c", "GPU-5a14/x")
    assert triton.parent.parent == tmp_path and "/" not in triton.parent.name


def test_isolation_points_the_guard_and_the_compilers_at_the_worker_caches(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "shared"))
    monkeypatch.delenv("TRITON_CACHE_DIR", raising=False)
    triton, inductor = isolate_compiler_caches(tmp_path / "caches", "node-1", "3")
    assert os.environ["TRITON_CACHE_DIR"] == str(triton) and triton.is_dir()
    assert os.environ["TORCHINDUCTOR_CACHE_DIR"] == str(inductor) and inductor.is_dir()
    assert compiler_cache_dirs() == [triton, inductor]


def test_a_gpu_worker_takes_its_own_caches_before_any_job(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for env in ("TRITON_CACHE_DIR", "TORCHINDUCTOR_CACHE_DIR", "CUDA_VISIBLE_DEVICES"):
        monkeypatch.delenv(env, raising=False)
    monkeypatch.setattr(worker, "gpu_names", lambda: ["NVIDIA H200", "NVIDIA H200"])
    monkeypatch.setattr(worker.socket, "gethostname", lambda: "node-1")
    settings = Settings(home=tmp_path)
    assert settings.compiler_caches_dir == tmp_path / "compiler-caches"
    assert worker.prepare_gpu_worker(settings, 1) == (1, "NVIDIA H200")
    assert os.environ["CUDA_VISIBLE_DEVICES"] == "1"
    assert compiler_cache_dirs() == list(
        worker_cache_dirs(tmp_path / "compiler-caches", "node-1", "1")
    )


def test_compiler_caches_root_comes_from_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KERNELOPT_COMPILER_CACHES", str(tmp_path / "fast-disk"))
    assert Settings.from_env().compiler_caches_dir == tmp_path / "fast-disk"


def test_another_workers_rewrite_does_not_fail_this_workers_candidate(tmp_path: Path) -> None:
    """The H200 suite run's false verdicts: the other worker's compile rewrote Inductor's
    benchmark-cache file while this worker's candidate was timed."""
    mine = list(worker_cache_dirs(tmp_path, "node-1", "0"))
    theirs = list(worker_cache_dirs(tmp_path, "node-1", "1"))
    for top in (*mine, *theirs):
        (top / "cache").mkdir(parents=True)
        (top / "cache" / "system").write_text('{"timings": {}}')
    time.sleep(0.05)  # file times tick coarsely; cache files are older than that
    guard = CacheGuard(mine, digests=local_digests)
    guard.arm()
    (theirs[1] / "cache" / "system").write_text('{"timings": {"mm": 0.1}}')
    assert guard.check() == []
    # the same write in this worker's own caches is still the candidate's
    guard.arm()
    (mine[1] / "cache" / "system").write_text('{"timings": {"mm": 0.1}}')
    assert guard.check() == [str(mine[1] / "cache" / "system")]
