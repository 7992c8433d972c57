"""``kernelopt state export`` / ``state import``: what they refuse, what they restore, and how.

Homes are built by hand here (a SQLite file where the server keeps its state,
blobs put through the real store), so these tests need no Temporal server; the
running-server refusals use the real embedded server.  The campaign carried
across lost machines is tests/durability/test_state_move.py.
"""

from __future__ import annotations

import io
import os
import sqlite3
import stat
import tarfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from rich.console import Console

from kernelopt.cli import output
from kernelopt.cli.app import main
from kernelopt.state_transfer import DB_NAME, MANIFEST_NAME, read_manifest
from kernelopt.store import open_store
from kernelopt.temporal_server import EmbeddedServer
from tests.support.temporal import make_settings


class Run:
    def __init__(self, code: int, out: str, err: str) -> None:
        self.code, self.out, self.err = code, out, " ".join(err.split())


@pytest.fixture
def kernelopt(monkeypatch: pytest.MonkeyPatch):
    """``main`` in this process on ``home``, its two consoles captured."""

    def run(home: Path, *args: str, **env: str) -> Run:
        out, err = io.StringIO(), io.StringIO()
        monkeypatch.setattr(output, "console", Console(file=out, width=200))
        monkeypatch.setattr(output, "err_console", Console(file=err, width=200))
        monkeypatch.setenv("KERNELOPT_HOME", str(home))
        monkeypatch.delenv("KERNELOPT_TEMPORAL_ADDRESS", raising=False)
        for key, value in env.items():
            monkeypatch.setenv(key, value)
        code = main(list(args))
        return Run(code, out.getvalue(), err.getvalue())

    return run


def make_home(home: Path, rows: int = 3) -> dict[str, str]:
    """A home with a server database, two artifacts and a result-index entry."""
    (home / "server").mkdir(parents=True)
    with sqlite3.connect(home / DB_NAME) as db:
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("CREATE TABLE executions (id TEXT PRIMARY KEY, state TEXT)")
        db.executemany(
            "INSERT INTO executions VALUES (?, ?)", [(f"c{i}", "open") for i in range(rows)]
        )
    (home / "server" / "server.log").write_text("per-machine log: not carried\n")
    store = open_store(home / "artifacts")
    refs = {name: store.put_text(f"kernel source {name}").sha256 for name in ("a", "b")}
    (home / "results" / "ab").mkdir(parents=True)
    (home / "results" / "ab" / "ab12.json").write_text('{"sha256": "x"}')
    (home / "regen_cache").mkdir()
    (home / "regen_cache" / "graph.json").write_text('{"regen:": "digest"}')
    (home / "workers").mkdir()
    (home / "workers" / "gpu0.pid").write_text("123")
    return refs


def test_export_then_import_restores_everything_with_private_modes(kernelopt, tmp_path: Path):
    refs = make_home(tmp_path / "a")
    archive = tmp_path / "state.tar.gz"
    done = kernelopt(tmp_path / "a", "state", "export", str(archive))
    assert done.code == 0, done.err
    assert "server stopped" in done.out and "artifacts" in done.out
    assert stat.S_IMODE(archive.stat().st_mode) == 0o600
    manifest = read_manifest(archive)
    paths = {f.path for f in manifest.files}
    assert DB_NAME in paths and "results/ab/ab12.json" in paths
    assert "regen_cache/graph.json" in paths  # a resumed search knows its diffs' code
    # bookkeeping and logs stay on the machine they describe
    assert not any(p.startswith("workers/") or p.endswith("server.log") for p in paths)

    new = tmp_path / "b"
    done = kernelopt(new, "state", "import", str(archive))
    assert done.code == 0, done.err
    assert "restored" in done.out and "kernelopt server start" in done.out
    with sqlite3.connect(new / DB_NAME) as db:
        assert db.execute("SELECT count(*) FROM executions").fetchone() == (3,)
    store = open_store(new / "artifacts")
    assert [store.get_text(refs[n]) for n in ("a", "b")] == ["kernel source a", "kernel source b"]
    assert (new / "regen_cache" / "graph.json").read_text() == '{"regen:": "digest"}'
    for path in new.rglob("*"):
        want = 0o700 if path.is_dir() else 0o600
        assert stat.S_IMODE(path.stat().st_mode) == want, path
    assert not (new / "workers").exists()


def test_files_left_out_are_named_in_the_manifest_and_not_restored(kernelopt, tmp_path: Path):
    """``export_state(leave_out=...)``: what the caller regenerates stays behind, named."""
    from kernelopt.state_transfer import export_state, import_state

    refs = make_home(tmp_path / "a")
    left = f"artifacts/{refs['a'][:2]}/{refs['a']}"
    assert (tmp_path / "a" / left).is_file()
    archive = tmp_path / "thin.tar.gz"
    report = export_state(make_settings(tmp_path / "a"), archive, leave_out=[left, "nonexistent"])
    assert report.manifest.left_out == [left]
    assert left not in {f.path for f in read_manifest(archive).files}
    with tarfile.open(archive) as tar:
        assert left not in tar.getnames()
    import_state(make_settings(tmp_path / "b"), archive)
    store = open_store(tmp_path / "b" / "artifacts")
    assert not store.exists(refs["a"]) and store.get_text(refs["b"]) == "kernel source b"


def test_import_refuses_a_home_with_state_unless_forced(kernelopt, tmp_path: Path):
    make_home(tmp_path / "a", rows=3)
    archive = tmp_path / "state.tar.gz"
    assert kernelopt(tmp_path / "a", "state", "export", str(archive)).code == 0
    make_home(tmp_path / "b", rows=7)
    done = kernelopt(tmp_path / "b", "state", "import", str(archive))
    assert done.code == 2
    assert "already holds state" in done.err and "--force" in done.err, done.err
    with sqlite3.connect(tmp_path / "b" / DB_NAME) as db:  # untouched
        assert db.execute("SELECT count(*) FROM executions").fetchone() == (7,)
    done = kernelopt(tmp_path / "b", "state", "import", "--force", str(archive))
    assert done.code == 0, done.err
    with sqlite3.connect(tmp_path / "b" / DB_NAME) as db:
        assert db.execute("SELECT count(*) FROM executions").fetchone() == (3,)


@contextmanager
def forging(kernelopt, tmp_path: Path) -> Iterator[tuple[tarfile.TarFile, tarfile.TarFile, Path]]:
    """Home ``a`` exported; its archive open to read and a forged copy open to write."""
    make_home(tmp_path / "a")
    archive = tmp_path / "state.tar.gz"
    assert kernelopt(tmp_path / "a", "state", "export", str(archive)).code == 0
    forged = tmp_path / "forged.tar.gz"
    with tarfile.open(archive) as src, tarfile.open(forged, "w:gz") as dst:
        yield src, dst, forged


def test_a_damaged_archive_changes_nothing(kernelopt, tmp_path: Path):
    # rewrite the archive with one artifact's bytes changed and the manifest kept
    with forging(kernelopt, tmp_path) as (src, dst, forged):
        for member in src:
            data = src.extractfile(member).read()
            if member.name.startswith("artifacts/"):
                data = data.replace(b"kernel", b"KERNEL")
            dst.addfile(member, io.BytesIO(data))
    done = kernelopt(tmp_path / "b", "state", "import", str(forged))
    assert done.code == 2
    assert "does not match its manifest digest" in done.err, done.err
    assert not (tmp_path / "b" / "artifacts").exists()
    assert not (tmp_path / "b" / DB_NAME).exists()
    assert [p.name for p in (tmp_path / "b").iterdir()] == []  # no staging left behind


def test_an_archive_with_a_member_the_manifest_does_not_name_is_refused(kernelopt, tmp_path: Path):
    with forging(kernelopt, tmp_path) as (src, dst, forged):
        for member in src:
            dst.addfile(member, src.extractfile(member))
        extra = tarfile.TarInfo("../outside.txt")
        extra.size = 2
        dst.addfile(extra, io.BytesIO(b"hi"))
    done = kernelopt(tmp_path / "b", "state", "import", str(forged))
    assert done.code == 2 and "unexpected member '../outside.txt'" in done.err, done.err
    assert not (tmp_path / "outside.txt").exists()


def test_not_an_archive_and_nothing_to_export(kernelopt, tmp_path: Path):
    junk = tmp_path / "junk.tar.gz"
    junk.write_bytes(b"not a tar")
    done = kernelopt(tmp_path / "b", "state", "import", str(junk))
    assert done.code == 2 and "not a kernelopt state archive" in done.err, done.err
    (tmp_path / "empty").mkdir()
    done = kernelopt(tmp_path / "empty", "state", "export", str(tmp_path / "x.tar.gz"))
    assert done.code == 2 and "no server database" in done.err, done.err
    make_home(tmp_path / "a")
    inside = tmp_path / "a" / "state.tar.gz"
    done = kernelopt(tmp_path / "a", "state", "export", str(inside))
    assert done.code == 2 and "outside" in done.err and not inside.exists()


def test_a_cluster_home_exports_and_imports_the_store_only(kernelopt, tmp_path: Path):
    refs = make_home(tmp_path / "a")
    archive = tmp_path / "store.tar.gz"
    cluster = {"KERNELOPT_TEMPORAL_ADDRESS": "temporal.example:7233"}
    done = kernelopt(tmp_path / "a", "state", "export", str(archive), **cluster)
    assert done.code == 2 and "--store-only" in done.err, done.err
    done = kernelopt(tmp_path / "a", "state", "export", "--store-only", str(archive), **cluster)
    assert done.code == 0, done.err
    manifest = read_manifest(archive)
    assert manifest.kind == "store-only" and manifest.server == "external"
    assert DB_NAME not in {f.path for f in manifest.files}
    done = kernelopt(tmp_path / "b", "state", "import", str(archive), **cluster)
    assert done.code == 0, done.err
    assert open_store(tmp_path / "b" / "artifacts").get_text(refs["a"]) == "kernel source a"
    assert not (tmp_path / "b" / "server").exists()


def test_a_running_server_is_snapshotted_and_never_overwritten(kernelopt, tmp_path: Path):
    settings = make_settings(tmp_path / "a")
    server = EmbeddedServer(settings)
    server.start()
    try:
        env = {
            "KERNELOPT_SERVER_PORT": str(settings.server_port),
            "KERNELOPT_UI_PORT": str(settings.ui_port),
        }
        archive = tmp_path / "live.tar.gz"
        done = kernelopt(settings.home, "state", "export", str(archive), **env)
        assert done.code == 0, done.err
        assert "server running" in done.out and "this is a snapshot" in done.err
        with tarfile.open(archive) as tar:
            db = tar.extractfile(DB_NAME).read()
            assert MANIFEST_NAME in tar.getnames()
        assert db.startswith(b"SQLite format 3\x00")
        done = kernelopt(settings.home, "state", "import", "--force", str(archive), **env)
        assert done.code == 2 and "kernelopt server stop" in done.err, done.err
        assert server.status().running
        done = kernelopt(tmp_path / "b", "state", "import", str(archive))  # elsewhere: a copy
        assert done.code == 0 and "snapshot of a running server" in done.err, done.err
    finally:
        server.stop()
    assert os.path.getsize(settings.home / DB_NAME) > 0
