"""A compiler cache carried to another machine brings nothing a candidate changed unchecked.

The cache guard (``gates.cache_guard``) judges what a candidate wrote into a GPU
worker's caches only when its window closes.  A state export taken while the window
is open -- a snapshot at the end of a loan, mid-candidate -- must not carry the
candidate's rewrite of a baseline kernel to a machine whose guard never saw the
original; neither may a window whose gate process died before its check.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from gates.cache_guard import CacheGuard, local_digests
from kernelopt.compiler_caches import read_window, worker_cache_dirs
from kernelopt.state_transfer import export_state, import_state, read_manifest
from tests.kernelopt.cli.test_state_caches import KEY, make_caches
from tests.kernelopt.cli.test_state_commands import make_home
from tests.support.temporal import make_settings

CUBIN = f"triton/{KEY}/triton_poi_fused_add_0.cubin"
GRAPH = f"inductor/fxgraph/ab/{KEY}/entry"
RECORD = "inductor/cq/cqzz.best_config"
REPO = Path(__file__).resolve().parents[2]


def worker_with_an_own_entry(root: Path) -> tuple[CacheGuard, Path]:
    """Caches of worker node-a/0, plus an entry an earlier candidate compiled (a slow kernel
    under a key of its own, kept: new files are a candidate's right); the guard over them."""
    make_caches(root, "node-a", "0")
    triton, inductor = worker_cache_dirs(root, "node-a", "0")
    own = triton / ("0" * 64)
    own.mkdir()
    (own / "triton_poi_fused_add_0.cubin").write_bytes(b"\x7fELF slow kernel")
    time.sleep(0.05)  # change times tick coarsely: the caches predate the window
    return CacheGuard([triton, inductor], digests=local_digests), triton.parent


def poison(folder: Path) -> None:
    """The candidate: the baseline's Triton entry replaced by its own (a folder renamed, so
    the files keep their old change times) and the baseline's FX graph rewritten."""
    shutil.rmtree(folder / "triton" / KEY)
    os.rename(folder / "triton" / ("0" * 64), folder / "triton" / KEY)
    (folder / GRAPH).write_bytes(b"pickled graph calling the slow kernel")


def test_an_export_mid_window_leaves_the_candidates_rewrites_behind(tmp_path: Path):
    make_home(tmp_path / "a")
    guard, folder = worker_with_an_own_entry(tmp_path / "a" / "compiler-caches")
    guard.arm()
    poison(folder)
    archive = tmp_path / "state.tar.gz"
    report = export_state(make_settings(tmp_path / "a"), archive, compiler_caches="all")
    names = {f.path for f in read_manifest(archive).files}
    prefix = "compiler-caches/node-a-gpu0/"
    assert prefix + RECORD in names  # untouched: travels
    assert prefix + CUBIN not in names and prefix + GRAPH not in names
    assert any("left behind" in n for n in report.notes)

    home = tmp_path / "b"
    import_state(make_settings(home), archive, host="node-b", gpus=[("0", "GPU-0")])
    moved = worker_cache_dirs(home / "compiler-caches", "node-b", "0")[0].parent
    assert not (moved / CUBIN).exists() and not (moved / GRAPH).exists()
    assert (moved / RECORD).is_file()

    # once checked, the window is closed and the guard has dropped what was poisoned
    assert guard.check()
    window = read_window(folder / "guard-window")
    assert window is not None and not window.open
    export_state(make_settings(tmp_path / "a"), archive, compiler_caches="all")
    names = {f.path for f in read_manifest(archive).files}
    assert prefix + CUBIN not in names and prefix + GRAPH not in names
    assert prefix + RECORD in names


def test_a_window_left_open_by_a_dead_gate_is_cleaned_before_the_next(tmp_path: Path):
    guard, folder = worker_with_an_own_entry(tmp_path / "caches")
    # a worker process arms its guard, its candidate poisons the caches, and the worker
    # dies before its check
    arm = "import sys; from gates.cache_guard import CacheGuard, local_digests; "
    arm += "from pathlib import Path; CacheGuard([Path(d) for d in sys.argv[1:]], "
    arm += "digests=local_digests).arm()"
    dirs = [str(d) for d in guard.dirs]
    subprocess.run([sys.executable, "-c", arm, *dirs], check=True, cwd=REPO)
    poison(folder)
    guard.arm()
    assert not (folder / CUBIN).exists() and not (folder / GRAPH).exists()
    assert (folder / RECORD).is_file()
    assert {Path(p).relative_to(folder).as_posix() for p in guard.stale} >= {CUBIN, GRAPH}
    assert guard.check() == []
    assert not read_window(folder / "guard-window").open


def test_windows_of_parallel_checks_share_the_record_and_drop_nothing(tmp_path: Path):
    """Two candidates checked at once (two bundles' guards on one worker's caches) open one
    window between them; neither is taken for a dead gate, and it closes with the last."""
    guard, folder = worker_with_an_own_entry(tmp_path / "caches")
    other = CacheGuard(guard.dirs, digests=local_digests)
    record = folder / "guard-window"
    guard.arm()
    opened = read_window(record)
    other.arm()
    assert read_window(record) == opened and guard.stale == [] and other.stale == []
    assert guard.check() == []
    assert read_window(record) == opened  # the other window is still open
    poison(folder)
    assert str(folder / GRAPH) in other.check()
    assert not read_window(record).open and not (folder / GRAPH).exists()


def test_threads_sharing_one_guard_each_judge_their_own_candidate(tmp_path: Path):
    guard, folder = worker_with_an_own_entry(tmp_path / "caches")
    armed, checked = threading.Barrier(2), threading.Event()

    def honest() -> list[str]:
        guard.arm()
        armed.wait()
        try:
            return guard.check()
        finally:
            checked.set()

    def tamperer() -> list[str]:
        guard.arm()
        armed.wait()
        checked.wait()  # rewrites after the honest check: only its own window saw it
        (folder / GRAPH).write_bytes(b"pickled graph calling the slow kernel")
        return guard.check()

    with ThreadPoolExecutor(2) as pool:
        first, second = pool.submit(honest), pool.submit(tamperer)
        assert first.result() == [] and second.result() == [str(folder / GRAPH)]
    assert not (folder / GRAPH).exists()
    assert not read_window(folder / "guard-window").open


def test_arming_twice_before_a_check_keeps_the_window_and_drops_nothing(tmp_path: Path):
    guard, folder = worker_with_an_own_entry(tmp_path / "caches")
    guard.arm()
    opened = read_window(folder / "guard-window")
    guard.arm()
    assert read_window(folder / "guard-window") == opened and guard.stale == []
    assert (folder / CUBIN).is_file() and guard.check() == []
