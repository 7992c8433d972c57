"""Jobs for a sandboxed zygote: copy what a job names into the zygote's view, and back.

A forked child inherits its zygote's mount namespace, and bubblewrap cannot
add a mount to a running sandbox.  So the zygote's view holds one staging
root (``ro/`` mounted read-only, ``rw/`` writable) and each job is staged
there: its read-only inputs hard-linked (copied across filesystems), its
writable directories and workdir copied, the job file rewritten to the
staged paths.  When the child has exited, the regular files it wrote are
moved back to the host paths (links and special files are dropped) and the
stage is deleted.  Each job also gets a scratch directory of its own beside
its staged workdir, which the child makes its ``HOME`` and ``TMPDIR``
(``gates.zygote``): the zygote's ``/tmp`` is shared by all its children.
Trade-off, documented in docs/security.md: children of one zygote running
*at the same time* can see each other's stages.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from gates.sandbox import LIMITS_FILE, job_view

_COUNTER = itertools.count(1)
# host side, beside the job: the staged workdir a running child really uses, so a parent
# can hand it a file while it runs (gates.go_signal); never copied in or moved back
LIVE_FILE = "live_workdir"
_NOT_BACK = {"job.json", LIMITS_FILE, LIVE_FILE}
SCRATCH = "scratch"


def scratch_of(workdir: Path) -> Path:
    """The job's own ``HOME`` and ``TMPDIR``, beside the staged ``workdir``: deleted with
    the stage and never moved back, so nothing a job leaves there reaches a later one."""
    return Path(workdir).parent / SCRATCH


def new_root() -> Path:
    """A private staging root (0700) next to the jobs' own temp dirs: hard links work."""
    root = Path(tempfile.mkdtemp(prefix="kernelopt-stage-"))
    (root / "ro").mkdir(mode=0o700)
    (root / "rw").mkdir(mode=0o700)
    return root


def _link_tree(src: Path, dst: Path) -> None:
    """Hard-link (else copy) regular files of ``src`` to ``dst``; links are not followed."""
    if src.is_symlink():
        return
    if src.is_dir():
        dst.mkdir(parents=True, exist_ok=True)
        for child in src.iterdir():
            _link_tree(child, dst / child.name)
    elif src.is_file():
        dst.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.link(src, dst)
        except OSError:
            shutil.copy2(src, dst)


def _copy_tree(src: Path, dst: Path) -> None:
    """Copy (never link: the child may write these) regular files of ``src`` to ``dst``.

    A FIFO (a turn child's channel, ``gates.turn_channel``) is made afresh: the
    parent opens the staged one, which is what the child sees.
    """
    dst.mkdir(parents=True, exist_ok=True)
    if not src.is_dir():
        return
    for child in src.iterdir():
        if child.is_symlink() or child.name in _NOT_BACK:
            continue
        if child.is_dir():
            _copy_tree(child, dst / child.name)
        elif child.is_file():
            shutil.copy2(child, dst / child.name)
        elif child.is_fifo():
            (dst / child.name).unlink(missing_ok=True)
            os.mkfifo(dst / child.name, 0o600)


def _move_back(src: Path, dst: Path) -> None:
    """Regular files and directories the child left in ``src`` go to ``dst``."""
    dst.mkdir(parents=True, exist_ok=True)
    for child in src.iterdir():
        if child.is_symlink():
            continue
        target = dst / child.name
        if child.is_dir():
            _move_back(child, target)
        elif child.is_file() and child.name not in _NOT_BACK:
            with contextlib.suppress(FileNotFoundError):
                if target.is_symlink() or target.is_dir():
                    continue
                try:
                    os.replace(child, target)
                except OSError:
                    shutil.copy2(child, target)


class Stage:
    """One job's copy under a zygote's staging root."""

    def __init__(self, root: Path, workdir: Path) -> None:
        self.workdir = Path(workdir)
        n = next(_COUNTER)
        self.ro = Path(root) / "ro" / str(n)
        self.rw = Path(root) / "rw" / str(n)
        self.work = self.rw / "work"  # the staged workdir (the host path the child writes)
        self.back: list[tuple[Path, Path]] = []

    def enter(self) -> Path:
        """Stage the job in ``workdir``; the staged workdir the child should run in."""
        job: dict[str, Any] = json.loads((self.workdir / "job.json").read_text())
        view = job_view(job, self.workdir)
        mapping: dict[str, str] = {}
        rw = set(view.rw)
        for i, path in enumerate(p for p in view.ro if p not in rw):
            staged = self.ro / f"{i}-{path.name}"
            _link_tree(path, staged)
            mapping[str(path)] = str(staged)
        for i, path in enumerate(view.rw[1:]):
            staged = self.rw / f"{i}-{path.name}"
            _copy_tree(path, staged)
            mapping[str(path)] = str(staged)
            self.back.append((staged, path))
        work = self.work
        _copy_tree(self.workdir, work)
        scratch_of(work).mkdir(mode=0o700)
        for name in _NOT_BACK:
            if (self.workdir / name).is_file():
                shutil.copy2(self.workdir / name, work / name)
        self.back.append((work, self.workdir))
        store = self.ro / "store"
        for blob in view.blobs:
            _link_tree(blob, store / blob.parent.name / blob.name)
        (work / "job.json").write_text(json.dumps(_rewrite(job, mapping, str(store))))
        (self.workdir / LIVE_FILE).write_text(str(work))
        return work

    def leave(self) -> None:
        """Move what the child wrote back to the host paths; delete the stage."""
        (self.workdir / LIVE_FILE).unlink(missing_ok=True)
        for staged, host in self.back:
            with contextlib.suppress(OSError):
                _move_back(staged, host)
        shutil.rmtree(self.ro, ignore_errors=True)
        shutil.rmtree(self.rw, ignore_errors=True)


def _rewrite(value: Any, mapping: dict[str, str], store: str) -> Any:
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            if key == "store_root" and item:
                out[key] = store
            elif isinstance(item, str) and item in mapping:
                out[key] = mapping[item]
            else:
                out[key] = _rewrite(item, mapping, store)
        return out
    if isinstance(value, list):
        return [_rewrite(v, mapping, store) for v in value]
    return value
