"""The compiler-cache watch window: what counts as a change, what is bookkeeping."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from gates.cache_guard import (
    CacheGuard,
    compiler_cache_dirs,
    content_digest,
    local_digests,
    process_memo,
    snapshot,
)
from gates.zygote_service import SOCKET_ENV, DigestMemo, ZygoteService


def _cache(tmp_path: Path) -> Path:
    root = tmp_path / "cache"
    (root / "ab").mkdir(parents=True)
    (root / "ab" / "k.cubin").write_bytes(b"binary")
    (root / "ab" / "k.json").write_text("{}")
    (root / "locks").mkdir()
    (root / "locks" / "x.lock").write_text("")
    # file times tick coarsely (a jiffy); cache files are always older than that
    time.sleep(0.05)
    return root


def test_changed_content_is_caught_same_bytes_removals_and_new_files_are_not(
    tmp_path: Path,
) -> None:
    root = _cache(tmp_path)
    (root / "ab" / "same.py").write_text("kernel source")
    (root / "ab" / "gone.cubin").write_bytes(b"old")
    time.sleep(0.05)
    guard = CacheGuard([root])
    guard.arm()
    with open(root / "ab" / "k.cubin", "ab") as handle:  # one byte appended in place
        handle.write(b"\0")
    replacement = root / "ab" / "new.json"
    replacement.write_text('{"slow": true}')
    os.replace(replacement, root / "ab" / "k.json")  # other content under the old name
    twin = root / "ab" / "twin.py"
    twin.write_text("kernel source")
    os.replace(twin, root / "ab" / "same.py")  # a concurrent compile of the same kernel
    (root / "ab" / "gone.cubin").unlink()  # regenerates: harmless
    (root / "cd").mkdir()
    (root / "cd" / "own.cubin").write_bytes(b"mine")  # a candidate's own compile
    touched = guard.check()
    assert touched == [str(root / "ab" / "k.cubin"), str(root / "ab" / "k.json")]
    # the whole entry goes (a Triton entry's metadata names the cubin beside it: half an
    # entry fails every later compile with KeyError 'cubin'); other entries stay
    assert not (root / "ab").exists()
    assert (root / "cd" / "own.cubin").exists()
    assert guard.describe(touched[0]) == "compiler cache cache/ab/k.cubin"
    assert guard.check() == []  # the window closed with the check
    (root / "ab").mkdir()
    (root / "ab" / "same.py").write_text("kernel source")  # regenerated
    guard.arm()  # the next window starts from what is there now
    (root / "ab" / "same.py").write_text("poisoned source")
    assert guard.check() == [str(root / "ab" / "same.py")]


def test_lock_files_and_writers_temp_dirs_are_bookkeeping(tmp_path: Path) -> None:
    root = _cache(tmp_path)
    (root / "tmp.pid_1_x").mkdir()
    (root / "tmp.pid_1_x" / "k.cubin").write_bytes(b"half written")
    guard = CacheGuard([root])
    guard.arm()
    with open(root / "locks" / "x.lock", "w"):  # filelock reopens with O_TRUNC
        pass
    (root / "tmp.pid_1_x" / "k.cubin").unlink()  # a writer's rename moved it on
    assert guard.check() == []


def test_cache_dirs_follow_the_environment(monkeypatch, tmp_path: Path) -> None:
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "t"))
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "i"))
    assert compiler_cache_dirs() == [tmp_path / "t", tmp_path / "i"]
    monkeypatch.delenv("TRITON_CACHE_DIR")
    monkeypatch.delenv("TORCHINDUCTOR_CACHE_DIR")
    triton_dir, inductor_dir = compiler_cache_dirs()
    assert triton_dir == Path.home() / ".triton" / "cache"
    assert inductor_dir.name.startswith("torchinductor_")


def test_the_worker_memo_hashes_a_file_state_once_and_never_trusts_a_stale_one(
    tmp_path: Path,
) -> None:
    root = _cache(tmp_path)
    cubin = str(root / "ab" / "k.cubin")
    memo = DigestMemo([root])
    memo.SETTLE_S = 0.0  # our files are milliseconds old; real cache files are not
    state = snapshot([root])[cubin]
    first = memo.digest(cubin, state)
    assert first == content_digest(cubin, state[1]) and memo.hashed == 1
    assert memo.digest(cubin, state) == first and memo.hashed == 1  # remembered
    (root / "ab" / "k.cubin").write_bytes(b"BINARY")  # same size, new change time
    assert memo.digest(cubin, state) == first  # what the file held in that state
    # a state it never hashed and the file has left: unknown, not the new bytes' digest
    assert DigestMemo([root]).digest(cubin, state) is None
    fresh = DigestMemo([root])  # default settle time: a file changed just now is not remembered
    new_state = snapshot([root])[cubin]
    assert fresh.digest(cubin, new_state) == content_digest(cubin, 6)
    fresh.digest(cubin, new_state)
    assert fresh.hashed == 2


def test_the_guards_of_one_process_hash_a_file_state_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without a worker, each guard (one per reference bundle) hashed the whole caches
    again; the process's memo hashes each file state once, and a rewrite is still blamed."""
    root = _cache(tmp_path)
    monkeypatch.setattr(DigestMemo, "SETTLE_S", 0.0)  # our files are milliseconds old
    memo = process_memo()
    before = memo.hashed
    for _ in range(3):
        guard = CacheGuard([root], digests=local_digests)
        guard.arm()
        assert guard.check() == []
    assert memo.hashed - before == len(snapshot([root]))
    guard = CacheGuard([root], digests=local_digests)
    guard.arm()
    (root / "ab" / "k.cubin").write_bytes(b"BINARY")  # same size, new change time
    assert guard.check() == [str(root / "ab" / "k.cubin")]


def test_guards_in_separate_processes_share_the_workers_digests(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each gate process arms its own guard; the worker hashes the caches once for all."""
    root = _cache(tmp_path)
    service = ZygoteService("cpu", str(tmp_path / "z.sock"))
    service.start(probe=False)
    service.digests = DigestMemo([root])
    service.digests.SETTLE_S = 0.0
    monkeypatch.setenv(SOCKET_ENV, service.path)
    try:
        first = CacheGuard([root])
        first.arm()
        assert first.check() == [] and service.digests.hashed == 2
        second = CacheGuard([root])  # the next gate_candidate: a new process, a new guard
        second.arm()
        assert service.digests.hashed == 2  # served from the memo
        (root / "ab" / "k.json").write_text('{"slow": 1}')  # poisoned inside the window
        assert second.check() == [str(root / "ab" / "k.json")]
        assert second.seconds > 0
        # a cache the worker does not vouch for is hashed here: a concurrent compile
        # writing the same bytes again stays benign, as without the worker
        extra = tmp_path / "inductor"
        extra.mkdir()
        (extra / "graph.py").write_text("compiled graph")
        third = CacheGuard([root, extra])
        third.arm()
        twin = extra / "twin.py"
        twin.write_text("compiled graph")
        os.replace(twin, extra / "graph.py")
        assert third.check() == []
    finally:
        service.close()
    # without the worker (its socket gone) a guard hashes by itself
    (root / "ab").mkdir()  # the entry the second guard dropped, regenerated
    (root / "ab" / "k.cubin").write_bytes(b"kernel")
    alone = CacheGuard([root])
    alone.arm()
    (root / "ab" / "k.cubin").write_bytes(b"poison")
    assert alone.check() == [str(root / "ab" / "k.cubin")]


def test_the_worker_memo_hashes_only_regular_files_under_the_caches(tmp_path: Path) -> None:
    """Any process of the user can reach the socket: it must not read or vouch for others."""
    root = _cache(tmp_path)
    memo = DigestMemo([root])
    memo.SETTLE_S = 0.0
    secret = tmp_path / "elsewhere.txt"
    secret.write_text("not a cache file")
    outside = snapshot([tmp_path])[str(secret)]
    assert memo.digest(str(secret), outside) is None
    sneaky = str(root / ".." / "elsewhere.txt")  # under the cache only by its spelling
    assert memo.digest(sneaky, outside) is None
    zero = os.lstat("/dev/zero")
    assert memo.digest("/dev/zero", (zero.st_ino, 0, zero.st_ctime_ns)) is None
    os.mkfifo(root / "ab" / "pipe.cubin")  # a read would block the worker's thread
    for odd in (root / "ab" / "pipe.cubin", root / "ab"):
        st = os.lstat(odd)
        assert memo.digest(str(odd), (st.st_ino, st.st_size, st.st_ctime_ns)) is None
    assert memo.hashed == 0


def test_a_fifo_or_symlink_left_in_the_cache_neither_hangs_nor_hides_a_swap(
    tmp_path: Path,
) -> None:
    root = _cache(tmp_path)
    os.mkfifo(root / "ab" / "trap.cubin")  # a blocking read here would hang every later gate
    own = tmp_path / "own.cubin"
    own.write_bytes(b"binary")  # the same bytes as the cached kernel, for now
    guard = CacheGuard([root], digests=local_digests)
    guard.arm()  # returns: the FIFO is judged by its type, not read
    (root / "ab" / "k.cubin").unlink()
    (root / "ab" / "k.cubin").symlink_to(own)  # the baseline would load the candidate's file
    assert guard.check() == [str(root / "ab" / "k.cubin")]
    assert not (root / "ab" / "k.cubin").is_symlink()


def test_a_rewritten_autotuning_record_is_dropped_without_blame(tmp_path: Path) -> None:
    root = _cache(tmp_path)
    record = root / "ab" / "k.best_config"
    record.write_text('{"XBLOCK": 128, "num_warps": 4}')
    time.sleep(0.05)
    guard = CacheGuard([root])
    guard.arm()
    # the trusted baseline re-tuned in a paired timing child and picked another config
    fresh = root / "ab" / "tmp.best"
    fresh.write_text('{"XBLOCK": 256, "num_warps": 8}')
    os.replace(fresh, record)
    assert guard.check() == []
    assert guard.retuned == [str(record)]
    assert not record.exists()  # re-tunes in the next process's warm-up, never timed
    assert (root / "ab" / "k.cubin").exists()  # the kernel beside it stays


def test_inductors_autotune_timings_are_a_record_dropped_without_blame(tmp_path: Path) -> None:
    """``<inductor cache>/cache/<hash>`` holds max-autotune's timings of each choice, which
    a compile rewrites whole, and so may a candidate that compiles: no code, but a poisoned
    timing would steer later compiles, so it goes either way."""
    triton, inductor = tmp_path / "triton", tmp_path / "inductor"
    (triton / "ab").mkdir(parents=True)
    (inductor / "cache").mkdir(parents=True)
    name = "7" * 64
    timings = inductor / "cache" / name
    timings.write_text('{"system": {}, "cache": {}}')
    lookalike = triton / "ab" / name  # the same kind of name elsewhere: a file like any other
    lookalike.write_text("kernel")
    time.sleep(0.05)
    guard = CacheGuard([triton, inductor])
    guard.arm()
    timings.write_text('{"system": {}, "cache": {"mm": {"k": {"0.1": 1.0}}}}')
    lookalike.write_text("other kernel")
    assert guard.check() == [str(lookalike)]
    assert guard.retuned == [str(timings)]
    assert not timings.exists()


def test_a_folder_swapped_for_a_link_to_a_rewritten_copy_is_caught(tmp_path: Path) -> None:
    """The walk lists a link to a folder but never follows it, so the files behind it read as
    removed (benign); no compiler makes links, so a new one is tampering."""
    root = _cache(tmp_path)
    guard = CacheGuard([root], digests=local_digests)
    guard.arm()
    (root / "ab").rename(root / "tmp.ab")  # a writer's temporary name: not walked
    (root / "tmp.ab" / "k.cubin").write_bytes(b"slow")
    (root / "ab").symlink_to(root / "tmp.ab")  # the baseline would load k.cubin through it
    assert guard.check() == [str(root / "ab")]
    assert not (root / "ab").exists()  # regenerates from source


def test_planted_autotune_timings_are_dropped(tmp_path: Path) -> None:
    """A timings file new in a candidate's window would steer the next compile's picks."""
    triton, inductor = tmp_path / "triton", tmp_path / "inductor"
    triton.mkdir()
    (inductor / "cache").mkdir(parents=True)
    guard = CacheGuard([triton, inductor], digests=local_digests)
    guard.arm()
    planted = inductor / "cache" / ("a" * 64)
    planted.write_text('{"system": {}, "cache": {"mm": {"k": {"0.1": 0.0}}}}')
    own = triton / "cd" / "kernel.cubin"  # the candidate's own new kernel stays
    own.parent.mkdir()
    own.write_bytes(b"binary")
    assert guard.check() == []
    assert guard.retuned == [str(planted)] and not planted.exists() and own.exists()


def test_an_autotuning_record_does_not_excuse_code_rewritten_with_it(tmp_path: Path) -> None:
    root = _cache(tmp_path)
    (root / "ab" / "k.best_config").write_text("{}")
    time.sleep(0.05)
    guard = CacheGuard([root])
    guard.arm()
    (root / "ab" / "k.best_config").write_text('{"num_warps": 1}')
    with open(root / "ab" / "k.cubin", "ab") as handle:
        handle.write(b"\0")
    assert guard.check() == [str(root / "ab" / "k.cubin")]
    assert not (root / "ab").exists()


def test_a_precompiled_header_rewritten_with_the_same_size_is_dropped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Inductor's precompiled C++ headers live in its cache (the zygote puts them there)
    and are larger than the guard hashes: any move of their state is a rewrite."""
    monkeypatch.setattr("gates.cache_guard.HASH_LIMIT", 8)
    root = _cache(tmp_path)
    headers = root / "precompiled_headers"
    headers.mkdir()
    (headers / "h.h").write_text("#include <torch/csrc/inductor/cpp_wrapper/cpu.h>\n")
    (headers / "h.h.gch").write_bytes(b"trusted header bytes")
    time.sleep(0.05)
    guard = CacheGuard([root])
    guard.arm()
    assert content_digest(headers / "h.h.gch", 20) == ""  # too big to hash: state alone
    with open(headers / "h.h.gch", "r+b") as handle:  # same size, other bytes, in place
        handle.write(b"planted")
    assert guard.check() == [str(headers / "h.h.gch")]
    assert not headers.exists() and (root / "ab" / "k.cubin").exists()
