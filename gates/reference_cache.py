"""Reference bundles kept by a GPU worker for later candidates of the same problem.

The reference child (model build, every input set in fp32 and float64) cost
seconds of GPU per ``gate_candidate``, and a search checks candidates of one
problem one after another.  So a GPU worker names a directory of its own
(``REFERENCE_CACHE_ENV``, set by ``worker.py``) and each ``gate_candidate``
process, which lives for one candidate, takes a bundle from there when one
was prepared for the same problem file, gate settings, code and device, and
else prepares one and leaves it there.

What keeps a shared bundle as trustworthy as a fresh one (gates/README.md,
"One reference for several candidates"):

* it judges at most ``GateSettings.reference_uses`` candidates and lives at
  most ``reference_max_age_s``; its reference child draws the held-out and
  new-values sets (and held-out shapes) once per use, and use ``i`` is judged on
  draw ``i`` alone, in a view of the inputs that holds no other draw: no
  candidate is judged on values an earlier one saw or could have passed on, and
  feedback never quotes their expected values;
* the directory is in no gate child's sandbox view (only the inputs, read-only,
  are); every file's digest is checked before each use, a use that did not
  end cleanly (a killed process, a candidate that rewrote shared files) retires
  the bundle, and a failed reference is never kept;
* one candidate at a time: a bundle in use is locked (``flock``), so a second
  process prepares its own.

A worker that restarts starts with an empty directory: nothing is carried over.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import hashlib
import json
import os
import re
import secrets
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO

from pydantic import BaseModel

from gates.call_policy import POLICY_FILE, policy_path, save_policy
from gates.problem_io import digest_dir, load_values, set_path
from gates.protocol import ReferenceResult
from gates.reference import ReferenceBundle, prepare_reference
from gates.runner import ChildOutcome
from kernelopt.code_version import code_fingerprint
from kernelopt.config import Settings
from kernelopt.contracts.verdicts import GateSettings
from kernelopt.log import get_logger

log = get_logger(__name__)

REFERENCE_CACHE_ENV = "KERNELOPT_REFERENCE_CACHE"
_RECORD = "record.json"
_LEASE = "lease"
_KEPT_DIRS = ("inputs", "inputs.pristine", "refs")
# one use's view of the inputs (the seed sets and its own draw) and its pristine copy:
# links into the kept directories, made anew for every use
_VIEW = "use.inputs"
_VIEW_PRISTINE = "use.pristine"


class CacheLimits(BaseModel):
    """How much a worker keeps: bundles (least recently used go first) and their bytes."""

    bundles: int = 4
    max_bytes: int = 4 << 30

    @classmethod
    def from_settings(cls, settings: Settings) -> CacheLimits:
        return cls(
            bundles=settings.reference_cache_bundles,
            max_bytes=settings.reference_cache_mib << 20,
        )


class KeptBundle(BaseModel):
    """What a kept bundle's directory says about it (``record.json``)."""

    key: str
    created: float
    last_used: float
    uses: int  # candidates judged by it so far, the current one included
    max_uses: int  # also the number of draws of unpredictable sets: use i takes draw i - 1
    bundle_id: str  # over every draw's inputs and seeds: the same in each use's audit
    max_age_s: float
    clean: bool  # False while a candidate uses it, and for good if that use did not end well
    nbytes: int
    digests: dict[str, str]  # "<dir>/<file>" -> sha256, for every file it keeps
    result: ReferenceResult
    outcome: dict  # the reference child's ChildOutcome (stages, description)

    def expired(self, now: float) -> bool:
        return self.uses >= self.max_uses or now - self.created > self.max_age_s


def reference_key(problem_path: str | Path, settings: GateSettings) -> str:
    """The problem file's bytes, every gate setting, the code and the device: one bundle each."""
    text = json.dumps(
        {
            "problem": hashlib.sha256(Path(problem_path).read_bytes()).hexdigest(),
            "settings": settings.model_dump(mode="json"),
            "code": code_fingerprint(),
            "gpu": os.environ.get("CUDA_VISIBLE_DEVICES", ""),
        },
        sort_keys=True,
    )
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def worker_reference_cache(home: Path, host: str, gpu: str) -> Path:
    """Give this GPU worker -- and every process it starts -- an empty directory of bundles.

    Emptied here, so a restarted worker rebuilds every reference instead of
    trusting what an earlier process (perhaps killed mid-candidate) left.
    """
    name = re.sub(r"[^A-Za-z0-9._-]", "_", f"{host}-gpu{gpu}")
    root = home / "references" / name
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True, mode=0o700)
    os.environ[REFERENCE_CACHE_ENV] = str(root)
    return root


def cache_root() -> Path | None:
    """The worker's directory of kept bundles; None outside a GPU worker (no sharing)."""
    value = os.environ.get(REFERENCE_CACHE_ENV)
    return Path(value) if value else None


@contextlib.contextmanager
def shared_reference(
    problem_path: str | Path,
    settings: GateSettings,
    workdir: Path,
    *,
    root: Path | None = None,
    limits: CacheLimits | None = None,
) -> Iterator[ReferenceBundle]:
    """The reference for one candidate: a kept bundle of this problem, else a new one.

    Without a cache root, or with ``reference_uses`` of 1, this is
    ``prepare_reference(problem_path, settings, workdir)``.  The bundle stays
    locked to this candidate for the ``with`` block; leaving it by an
    exception, or with the bundle's shared files rewritten, retires it.
    """
    root = root if root is not None else cache_root()
    if root is None or settings.reference_uses <= 1:
        yield prepare_reference(problem_path, settings, workdir)
        return
    limits = limits or CacheLimits.from_settings(Settings.from_env())
    root.mkdir(parents=True, exist_ok=True)
    key = reference_key(problem_path, settings)
    with _index_lock(root):
        _evict(root, limits)
        entry, lease, record = _take(root, key)
    bundle = None
    ended_well = False
    try:
        if record is None:
            bundle = _prepare(entry, problem_path, settings, limits)
        else:
            bundle = _load(entry, record, problem_path, settings)
        yield bundle
        ended_well = True
    finally:
        with _index_lock(root):
            _release(entry, bundle, ended_well)
            lease.close()
            _evict(root, limits)


@contextlib.contextmanager
def _index_lock(root: Path) -> Iterator[None]:
    """Short critical sections over the directory's entries (a worker's processes only)."""
    with open(root / ".lock", "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _lock_entry(entry: Path) -> IO[str] | None:
    """The entry's lease, held until closed (or the process dies); None when taken."""
    handle = open(entry / _LEASE, "a")  # noqa: SIM115 -- held past this function
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.close()
        return None
    return handle


def _read(entry: Path) -> KeptBundle | None:
    try:
        return KeptBundle.model_validate_json((entry / _RECORD).read_text())
    except (OSError, ValueError):
        return None


def _write(entry: Path, record: KeptBundle) -> None:
    tmp = entry / f"{_RECORD}.tmp"
    tmp.write_text(record.model_dump_json())
    tmp.replace(entry / _RECORD)


def _take(root: Path, key: str) -> tuple[Path, IO[str], KeptBundle | None]:
    """An unused, unexpired, intact kept bundle for ``key`` (locked), else a new locked entry."""
    now = time.time()
    for entry in sorted(root.glob(f"{key}-*")):
        record = _read(entry)
        if record is None or not record.clean or record.expired(now):
            continue
        lease = _lock_entry(entry)
        if lease is None:
            continue  # another candidate is judged on it right now
        if _digests(entry) != record.digests:
            log.warning("reference_cache.tampered", entry=entry.name)
            shutil.rmtree(entry, ignore_errors=True)
            lease.close()
            continue
        record = record.model_copy(update={"uses": record.uses + 1, "last_used": now})
        _write(entry, record.model_copy(update={"clean": False}))
        return entry, lease, record
    entry = root / f"{key}-{secrets.token_hex(6)}"
    entry.mkdir()
    lease = _lock_entry(entry)
    assert lease is not None  # a directory nobody else knows yet
    return entry, lease, None


def _prepare(
    entry: Path, problem_path: str | Path, settings: GateSettings, limits: CacheLimits
) -> ReferenceBundle:
    """A new bundle in ``entry``; kept (its record written) when it ran and fits the limits."""
    started = time.time()
    uses = settings.reference_uses
    bundle = prepare_reference(problem_path, settings, entry, keep_refs=True, draws=uses)
    bundle.max_uses = uses
    if not bundle.ok or bundle.result is None:
        return bundle
    bundle.shared_id = bundle.bundle_id  # every draw's inputs and seeds, before keeping one
    every_draw = bundle.result
    digests = _digests(entry)
    nbytes = sum((entry / name).stat().st_size for name in digests)
    _open_draw(entry, bundle, 0)
    if nbytes > limits.max_bytes:
        return bundle  # no record: released as unkept, and removed
    record = KeptBundle(
        key=entry.name.rsplit("-", 1)[0],
        created=started,
        last_used=started,
        uses=1,
        max_uses=uses,
        bundle_id=bundle.shared_id,
        max_age_s=settings.reference_max_age_s,
        clean=False,
        nbytes=nbytes,
        digests=digests,
        result=every_draw,
        outcome=dataclasses.asdict(bundle.outcome),
    )
    _write(entry, record)
    log.info("reference_cache.prepared", entry=entry.name, bundle=bundle.bundle_id, bytes=nbytes)
    return bundle


def _load(
    entry: Path, record: KeptBundle, problem_path: str | Path, settings: GateSettings
) -> ReferenceBundle:
    """The kept bundle at its next draw, that draw's reference outputs back in memory,
    guarding this candidate's files."""
    outcome = ChildOutcome(**record.outcome)
    bundle = ReferenceBundle(
        str(problem_path), settings, entry, entry / "inputs", outcome, draws=record.max_uses
    )
    draw = record.uses - 1
    result = record.result
    bundle.result = result
    mine = [s for s in result.input_sets if s.group in (-1, draw)]
    refs = entry / "refs"
    bundle.refs = {s.name: load_values(set_path(str(refs), s.name)) for s in mine}
    if result.fp64_available:
        bundle.refs64 = {s.name: load_values(set_path(str(refs), f"{s.name}.fp64")) for s in mine}
    bundle.shared_id = record.bundle_id
    bundle.guard(problem_path)
    bundle.use = record.uses
    bundle.max_uses = record.max_uses
    _open_draw(entry, bundle, draw)
    log.info("reference_cache.reused", bundle=bundle.bundle_id, use=bundle.use, draw=draw)
    return bundle


def _open_draw(entry: Path, bundle: ReferenceBundle, draw: int) -> None:
    """Judge the current candidate on draw ``draw`` alone, through a view of the inputs.

    The view holds the seed sets, the weights and this draw's sets (linked from
    the kept inputs, its pristine copy likewise) and a policy naming only them:
    no candidate process sees another draw's inputs or seeds, so none can work
    out answers for a later candidate's sets.
    """
    sets = bundle.input_sets
    if any(s.group >= 0 for s in sets) and not any(s.group == draw for s in sets):
        raise RuntimeError(f"reference bundle {entry.name} has no draw {draw}: retired")
    others = {s.name for s in sets if s.group not in (-1, draw)}
    bundle.keep_draw(draw)
    skip = {f"{name}.pt" for name in others} | {f"{name}.post.pt" for name in others}
    skip.add(POLICY_FILE)
    view, pristine = entry / _VIEW, entry / _VIEW_PRISTINE
    for target in (view, pristine):
        shutil.rmtree(target, ignore_errors=True)
        target.mkdir()
    for source in sorted((entry / "inputs").iterdir()):
        if source.name in skip or not source.is_file():
            continue
        _link_or_copy(source, view / source.name)
        _link_or_copy(entry / "inputs.pristine" / source.name, pristine / source.name)
    if (entry / "inputs" / POLICY_FILE).is_file():
        save_policy(view, bundle.policy)
        shutil.copy2(policy_path(view), policy_path(pristine))
    bundle.inputs_dir = view
    bundle.pristine_dir = pristine
    bundle.input_digests = digest_dir(view)


def _link_or_copy(source: Path, target: Path) -> None:
    """A hard link (no bytes copied; the kept file's digest still guards it), else a copy."""
    try:
        os.link(source, target)
    except OSError:
        shutil.copy2(source, target)


def _release(entry: Path, bundle: ReferenceBundle | None, ended_well: bool) -> None:
    """Mark a use that ended well clean again; retire the bundle after any other end."""
    record = _read(entry)
    tampered = bundle is None or bundle.corrupted or bundle.tamper_seen
    if record is None or not ended_well or tampered or record.expired(time.time()):
        shutil.rmtree(entry, ignore_errors=True)
        return
    for view in (_VIEW, _VIEW_PRISTINE):  # the next use makes its own
        shutil.rmtree(entry / view, ignore_errors=True)
    _write(entry, record.model_copy(update={"clean": True}))


def _digests(entry: Path) -> dict[str, str]:
    out: dict[str, str] = {}
    for name in _KEPT_DIRS:
        out.update({f"{name}/{k}": v for k, v in digest_dir(entry / name).items()})
    return out


def _evict(root: Path, limits: CacheLimits) -> None:
    """Drop what can never be used again, then the least recently used beyond the limits."""
    now = time.time()
    kept: list[tuple[float, int, Path]] = []
    for entry in [p for p in root.iterdir() if p.is_dir()]:
        lease = _lock_entry(entry)
        if lease is None:
            continue  # in use: judged when it is released
        with lease:
            record = _read(entry)
            if record is None or not record.clean or record.expired(now):
                shutil.rmtree(entry, ignore_errors=True)  # unfinished, failed or spent
                continue
        kept.append((record.last_used, record.nbytes, entry))
    kept.sort(reverse=True)  # most recently used first
    total = 0
    for count, (_, nbytes, entry) in enumerate(kept, start=1):
        total += nbytes
        if count > limits.bundles or total > limits.max_bytes:
            shutil.rmtree(entry, ignore_errors=True)
