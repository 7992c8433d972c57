"""``kernelopt state export --compiler-caches``: GPU workers' caches move with a campaign.

Fake worker caches in the layout ``worker_cache_dirs`` gives (a Triton entry with its
group file naming the kernel by absolute path, an Inductor FX-graph entry and an
autotuning record) travel from host ``node-a`` to ``node-b`` through a real archive.
"""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path

import pytest
from rich.console import Console

from kernelopt import cache_transfer
from kernelopt.audit.moves import read_moves
from kernelopt.cli import output
from kernelopt.cli.app import main
from kernelopt.compiler_caches import worker_cache_dirs
from kernelopt.state_transfer import StateTransferError, export_state, import_state, read_manifest
from kernelopt.store import open_store
from tests.kernelopt.cli.test_state_commands import Run, make_home
from tests.support.temporal import make_settings

KEY = "9f2c" * 16


@pytest.fixture
def cli(monkeypatch: pytest.MonkeyPatch):
    """``main`` in this process on ``home``, its two consoles captured."""

    def run(home: Path, *args: str) -> Run:
        out, err = io.StringIO(), io.StringIO()
        monkeypatch.setattr(output, "console", Console(file=out, width=200))
        monkeypatch.setattr(output, "err_console", Console(file=err, width=200))
        monkeypatch.setenv("KERNELOPT_HOME", str(home))
        monkeypatch.delenv("KERNELOPT_TEMPORAL_ADDRESS", raising=False)
        monkeypatch.delenv("KERNELOPT_COMPILER_CACHES", raising=False)
        return Run(main(list(args)), out.getvalue(), err.getvalue())

    return run


def make_caches(root: Path, host: str, gpu: str) -> dict[str, bytes]:
    """One worker's Triton and Inductor caches; {path relative to the worker folder: bytes}."""
    triton, _ = worker_cache_dirs(root, host, gpu)
    entry = triton / KEY
    entry.mkdir(parents=True)
    files = {
        f"triton/{KEY}/triton_poi_fused_add_0.cubin": b"\x7fELF baseline kernel",
        f"triton/{KEY}/triton_poi_fused_add_0.json": b'{"name": "triton_poi_fused_add_0"}',
        f"inductor/fxgraph/ab/{KEY}/entry": b"pickled compiled graph",
        "inductor/cq/cqzz.best_config": b'{"XBLOCK": 1024}',
    }
    for rel, data in files.items():
        path = triton.parent / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    group = {"child_paths": {n: str(entry / n) for n in ("triton_poi_fused_add_0.cubin",)}}
    (entry / "__grp__triton_poi_fused_add_0.json").write_text(json.dumps(group))
    (triton / "cache.lock").write_text("")  # bookkeeping: never archived
    return files


def test_caches_travel_to_the_new_hosts_worker_for_the_same_gpu(cli, tmp_path: Path):
    make_home(tmp_path / "a")
    files = make_caches(tmp_path / "a" / "compiler-caches", "node-a", "1")
    archive = tmp_path / "state.tar.gz"
    done = cli(tmp_path / "a", "state", "export", "--compiler-caches", str(archive))
    assert done.code == 0, done.err
    assert "compiler-caches" in done.out and "compiler caches: 1 worker(s), 5 file(s)" in done.out
    assert "total " in done.out and "archive " in done.out
    manifest = read_manifest(archive)
    assert manifest.compiler_caches is not None
    digests = {f.path: f.sha256 for f in manifest.files}
    name = f"compiler-caches/node-a-gpu1/triton/{KEY}/triton_poi_fused_add_0.cubin"
    assert name in digests and not any(p.endswith(".lock") for p in digests)

    home = tmp_path / "b"
    report = import_state(
        make_settings(home), archive, host="node-b", gpus=[("0", "GPU-x"), ("1", "GPU-y")]
    )
    triton, _ = worker_cache_dirs(home / "compiler-caches", "node-b", "1")
    for rel, data in files.items():
        assert (triton.parent / rel).read_bytes() == data, rel
    assert not (home / "compiler-caches" / "node-a-gpu1").exists()
    group = json.loads((triton / KEY / "__grp__triton_poi_fused_add_0.json").read_text())
    (child,) = group["child_paths"].values()
    assert child == str(triton / KEY / "triton_poi_fused_add_0.cubin") and Path(child).is_file()
    assert any("compiler caches restored: 5 file(s)" in n for n in report.notes)
    (move,) = read_moves(open_store(home / "artifacts"))
    assert move.compiler_caches == ["node-a-gpu1 -> node-b-gpu1"]
    assert move.compiler_caches_files == 5 and move.compiler_caches_bytes > 0


def test_a_gpu_id_missing_here_is_mapped_by_position_and_said(tmp_path: Path):
    make_home(tmp_path / "a")
    make_caches(tmp_path / "a" / "compiler-caches", "node-a", "GPU-1f0e-aa")
    archive = tmp_path / "state.tar.gz"
    export_state(make_settings(tmp_path / "a"), archive, compiler_caches="all")
    home = tmp_path / "b"
    report = import_state(make_settings(home), archive, host="node-b", gpus=[("0", "GPU-77")])
    assert any("does not exist here" in n and "GPU 0 (by position)" in n for n in report.notes)
    triton, _ = worker_cache_dirs(home / "compiler-caches", "node-b", "0")
    assert (triton / KEY / "triton_poi_fused_add_0.cubin").is_file()


def test_other_compiler_versions_are_refused_unless_forced(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    make_home(tmp_path / "a")
    make_caches(tmp_path / "a" / "compiler-caches", "node-a", "0")
    archive = tmp_path / "state.tar.gz"
    export_state(make_settings(tmp_path / "a"), archive, compiler_caches="all")
    monkeypatch.setattr(cache_transfer, "compiler_versions", lambda: ("9.9.9", "3.9.0"))
    home = tmp_path / "b"
    with pytest.raises(StateTransferError, match=r"torch .* there, 9\.9\.9 here.*--force"):
        import_state(make_settings(home), archive, host="node-b", gpus=[("0", "GPU-0")])
    assert not home.exists() or not any(home.rglob("*"))
    report = import_state(
        make_settings(home), archive, force=True, host="node-b", gpus=[("0", "GPU-0")]
    )
    assert any("compiler caches left out" in w for w in report.warnings)
    assert not (home / "compiler-caches").exists() and (home / "server" / "temporal.db").is_file()
    assert read_moves(open_store(home / "artifacts"))[0].compiler_caches_files == 0


def test_a_tampered_cache_file_is_refused_and_nothing_changes(tmp_path: Path):
    make_home(tmp_path / "a")
    make_caches(tmp_path / "a" / "compiler-caches", "node-a", "0")
    archive, forged = tmp_path / "state.tar.gz", tmp_path / "forged.tar.gz"
    export_state(make_settings(tmp_path / "a"), archive, compiler_caches="all")
    with tarfile.open(archive) as src, tarfile.open(forged, "w:gz") as dst:
        for member in src:
            data = src.extractfile(member).read()
            if member.name.endswith(".cubin"):
                data = b"\x7fELF slow kernel!!!!"  # same size, other bytes
            dst.addfile(member, io.BytesIO(data))
    home = tmp_path / "b"
    with pytest.raises(StateTransferError, match="does not match its manifest digest"):
        import_state(make_settings(home), forged, host="node-b", gpus=[("0", "GPU-0")])
    assert [p.name for p in home.iterdir()] == []


def test_the_default_export_leaves_caches_behind_and_a_home_without_says_so(cli, tmp_path: Path):
    make_home(tmp_path / "a")
    archive = tmp_path / "state.tar.gz"
    done = cli(tmp_path / "a", "state", "export", "--compiler-caches", str(archive))
    assert done.code == 0, done.err
    assert "no GPU worker compiler caches under" in done.out
    assert read_manifest(archive).compiler_caches is None
    make_caches(tmp_path / "a" / "compiler-caches", "node-a", "0")
    done = cli(tmp_path / "a", "state", "export", "--no-autotune-results", str(archive))
    assert done.code == 0, done.err
    manifest = read_manifest(archive)
    assert manifest.compiler_caches is None
    assert not any(f.path.startswith("compiler-caches/") for f in manifest.files)


def test_the_default_export_carries_the_autotuning_results_alone(cli, tmp_path: Path):
    make_home(tmp_path / "a")
    make_caches(tmp_path / "a" / "compiler-caches", "node-a", "0")
    _, inductor = worker_cache_dirs(tmp_path / "a" / "compiler-caches", "node-a", "0")
    (inductor / "cache").mkdir()
    (inductor / "cache" / "5be1").write_text('{"cache": {"mm": {}}}')  # GEMM choice timings
    archive = tmp_path / "state.tar.gz"
    done = cli(tmp_path / "a", "state", "export", str(archive))
    assert done.code == 0, done.err
    assert "autotuning results: 1 worker(s), 2 file(s)" in done.out
    manifest = read_manifest(archive)
    assert manifest.compiler_caches is not None and manifest.compiler_caches.scope == "autotune"
    assert sorted(f.path for f in manifest.files if f.path.startswith("compiler-caches/")) == [
        "compiler-caches/node-a-gpu0/inductor/cache/5be1",
        "compiler-caches/node-a-gpu0/inductor/cq/cqzz.best_config",
    ]
    home = tmp_path / "b"
    import_state(make_settings(home), archive, host="node-b", gpus=[("0", "GPU-0")])
    _, there = worker_cache_dirs(home / "compiler-caches", "node-b", "0")
    assert (there / "cache" / "5be1").is_file() and (there / "cq" / "cqzz.best_config").is_file()
    assert not (there / "fxgraph").exists()


def test_autotuning_results_of_other_versions_are_left_out_not_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    make_home(tmp_path / "a")
    make_caches(tmp_path / "a" / "compiler-caches", "node-a", "0")
    archive = tmp_path / "state.tar.gz"
    export_state(make_settings(tmp_path / "a"), archive)
    monkeypatch.setattr(cache_transfer, "compiler_versions", lambda: ("9.9.9", "3.9.0"))
    home = tmp_path / "b"
    report = import_state(make_settings(home), archive, host="node-b", gpus=[("0", "GPU-0")])
    assert any("compiler caches left out" in w for w in report.warnings)
    assert not (home / "compiler-caches").exists() and (home / "server" / "temporal.db").is_file()


def test_autotuning_results_leave_a_worker_with_caches_of_its_own_alone(tmp_path: Path):
    make_home(tmp_path / "a")
    make_caches(tmp_path / "a" / "compiler-caches", "node-a", "0")
    archive = tmp_path / "state.tar.gz"
    export_state(make_settings(tmp_path / "a"), archive)
    home = tmp_path / "b"
    triton, _ = worker_cache_dirs(home / "compiler-caches", "node-b", "0")
    triton.mkdir(parents=True)
    (triton / "own.cubin").write_bytes(b"compiled here")
    report = import_state(make_settings(home), archive, host="node-b", gpus=[("0", "GPU-0")])
    assert any("not restored: it has caches" in n for n in report.notes)
    assert (triton / "own.cubin").read_bytes() == b"compiled here"
    assert (home / "server" / "temporal.db").is_file()
