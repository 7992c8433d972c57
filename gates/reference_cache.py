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
  most ``reference_max_age_s``; use ``i`` is judged on a draw of the held-out and
  new-values sets (and held-out shapes) of its own, draw ``i - 1``, in a view of
  the inputs that holds no other draw: no candidate is judged on values an
  earlier one saw or could have passed on, and feedback never quotes their
  expected values;
* draws are made lazily: a new bundle's reference child makes the seeded sets
  and draw 0 (what an unshared reference costs), and each later use runs the
  reference child for its own draw alone, in the kept bundle's directory, then
  drops the previous draw (most bundles are used once: draws made ahead would
  mostly be wasted).  That child decides the evaluation policy again; a draw that
  disagrees with the bundle (or fails) retires it, and a fresh full reference
  judges the candidate instead: never a mixed policy;
* the directory is in no gate child's sandbox view (only the inputs, read-only,
  are; a draw's sealed sets reach a timing child only when it asks: ``gates.first_sight``); before each use the kept files' names and the digests of every file
  that use reads are checked (a new draw's files are hashed once, right after
  its child wrote them), a use that did not end cleanly (a killed process, a
  candidate that rewrote shared files) retires the bundle, and a failed
  reference is never kept;
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
from gates.problem_io import digest_files
from gates.protocol import ReferenceResult
from gates.reference import (
    ReferenceBundle,
    draw_disagrees,
    load_references,
    prepare_draw,
    prepare_reference,
    with_draw,
)
from gates.runner import ChildOutcome
from kernelopt.code_version import code_fingerprint
from kernelopt.config import Settings
from kernelopt.contracts.verdicts import GateSettings
from kernelopt.file_lock import exclusive_lock
from kernelopt.log import get_logger
from kernelopt.store import file_digest

log = get_logger(__name__)

REFERENCE_CACHE_ENV = "KERNELOPT_REFERENCE_CACHE"
_RECORD = "record.json"
_LEASE = "lease"
_KEPT_DIRS = ("inputs", "inputs.pristine", "refs", "sealed")  # sealed: timing's first sight
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
    max_uses: int  # also the most draws of unpredictable sets: use i makes draw i - 1
    draws: int = 1  # draws made so far; only the latest one's sets and files are kept
    spent_seeds: list[int] = []  # the dropped draws' seeds, which no new draw repeats
    bundle_id: str  # over its first use's inputs and seeds: the same in each use's audit
    max_age_s: float
    clean: bool  # False while a candidate uses it, and for good if that use did not end well
    nbytes: int
    digests: dict[str, str]  # "<dir>/<file>" -> sha256, for every file it keeps
    result: ReferenceResult  # the seeded sets and the latest draw
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
        if record is not None:
            bundle = _load(entry, record, problem_path, settings)
            if bundle is None:  # no draw of its own for this use: retired, start afresh
                entry, lease = _renew(root, key, entry, lease)
        if bundle is None:
            bundle = _prepare(entry, problem_path, settings, limits)
        yield bundle
        ended_well = True
    finally:
        with _index_lock(root):
            _release(entry, bundle, ended_well)
            lease.close()
            _evict(root, limits)


def _index_lock(root: Path) -> contextlib.AbstractContextManager[None]:
    """Short critical sections over the directory's entries (a worker's processes only)."""
    return exclusive_lock(root / ".lock")


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
        if not _intact(entry, record):
            log.warning("reference_cache.tampered", entry=entry.name)
            shutil.rmtree(entry, ignore_errors=True)
            lease.close()
            continue
        record = record.model_copy(update={"uses": record.uses + 1, "last_used": now})
        _write(entry, record.model_copy(update={"clean": False}))
        return entry, lease, record
    entry, lease = _new_entry(root, key)
    return entry, lease, None


def _new_entry(root: Path, key: str) -> tuple[Path, IO[str]]:
    """An empty entry for ``key``, locked to this process."""
    entry = root / f"{key}-{secrets.token_hex(6)}"
    entry.mkdir()
    lease = _lock_entry(entry)
    assert lease is not None  # a directory nobody else knows yet
    return entry, lease


def _renew(root: Path, key: str, entry: Path, lease: IO[str]) -> tuple[Path, IO[str]]:
    """Retire ``entry`` and lock a new empty one in its place."""
    with _index_lock(root):
        shutil.rmtree(entry, ignore_errors=True)
        lease.close()
        return _new_entry(root, key)


def _prepare(
    entry: Path, problem_path: str | Path, settings: GateSettings, limits: CacheLimits
) -> ReferenceBundle:
    """A new bundle in ``entry``; kept (its record written) when it ran and fits the limits."""
    started = time.time()
    uses = settings.reference_uses
    bundle = prepare_reference(problem_path, settings, entry, keep_refs=True)
    bundle.max_uses = bundle.draws = uses
    if not bundle.ok or bundle.result is None:
        return bundle
    bundle.shared_id = bundle.bundle_id  # its first use's inputs and seeds
    digests = _first_digests(entry, bundle)
    nbytes = _nbytes(entry, digests)
    _open_draw(entry, bundle, 0, digests)
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
        result=bundle.result,
        outcome=dataclasses.asdict(bundle.outcome),
    )
    _write(entry, record)
    log.info("reference_cache.prepared", entry=entry.name, bundle=bundle.bundle_id, bytes=nbytes)
    return bundle


def _load(
    entry: Path, record: KeptBundle, problem_path: str | Path, settings: GateSettings
) -> ReferenceBundle | None:
    """The kept bundle with a new draw for this use, its reference outputs back in memory,
    guarding this candidate's files; None when the draw cannot join it (then retired)."""
    draw = record.uses - 1
    if record.draws != draw:
        log.warning("reference_cache.draw_mismatch", entry=entry.name, use=record.uses)
        return None
    record, outcome = _add_draw(entry, record, problem_path, settings)
    if outcome is None:
        return None
    bundle = ReferenceBundle(
        str(problem_path), settings, entry, entry / "inputs", ChildOutcome(**record.outcome)
    )
    result = record.result
    bundle.result = result
    load_references(bundle, entry / "refs", result, mmap=False)
    bundle.shared_id = record.bundle_id
    bundle.guard(problem_path)
    bundle.use = record.uses
    bundle.max_uses = bundle.draws = record.max_uses
    bundle.draw_outcome = outcome
    _open_draw(entry, bundle, draw, record.digests)
    log.info("reference_cache.reused", bundle=bundle.bundle_id, use=bundle.use, draw=draw)
    return bundle


def _add_draw(
    entry: Path, record: KeptBundle, problem_path: str | Path, settings: GateSettings
) -> tuple[KeptBundle, ChildOutcome | None]:
    """Run the reference child for this use's draw into the kept directories, then keep that
    draw in place of the previous one; the outcome is None when the draw cannot join."""
    draw = record.draws
    outcome, drawn = prepare_draw(
        record.result, problem_path, settings, entry, draw, set(record.spent_seeds)
    )
    why = draw_disagrees(record.result, drawn) if drawn is not None else outcome.describe()
    if drawn is None or why:
        log.warning("reference_cache.draw_rejected", entry=entry.name, draw=draw, why=why[:500])
        return record, None
    spent = [s.seed for s in record.result.input_sets if s.group >= 0]
    digests = _drop_sets(entry, record, {s.name for s in record.result.input_sets if s.group >= 0})
    digests.update(_new_files(entry, digests))
    record = record.model_copy(
        update={
            "draws": draw + 1,
            "spent_seeds": record.spent_seeds + spent,
            "digests": digests,
            "nbytes": _nbytes(entry, digests),
            "result": with_draw(record.result, drawn),
        }
    )
    _write(entry, record)  # still unclean: in use
    return record, outcome


def _set_name(file_name: str) -> str:
    """The input set a kept file belongs to: ``<set>.pt``, ``<set>.post.pt``,
    ``<set>.state_after.pt`` and the float64 run's ``<set>[.post|.state_after|.ties].fp64.pt``."""
    stem = file_name.removesuffix(".pt").removesuffix(".fp64")
    return stem.removesuffix(".post").removesuffix(".state_after").removesuffix(".ties")


def _drop_sets(entry: Path, record: KeptBundle, names: set[str]) -> dict[str, str]:
    """Delete the kept files of sets ``names``; the digests of the files left."""
    kept: dict[str, str] = {}
    for key, digest in record.digests.items():
        if _set_name(key.split("/", 1)[1]) in names:
            (entry / key).unlink(missing_ok=True)
        else:
            kept[key] = digest
    return kept


def _new_files(entry: Path, known: dict[str, str]) -> dict[str, str]:
    """Digests of the files a draw's reference child just wrote, hashed once, and of the
    pristine copies of its inputs made here."""
    keys = [
        f"{name}/{path.name}"
        for name in ("inputs", "refs", "sealed")
        for path in sorted((entry / name).glob("*.pt"))
        if f"{name}/{path.name}" not in known
    ]
    out = _digests(entry, keys)
    for key in keys:
        name, file_name = key.split("/", 1)
        if name == "inputs":
            shutil.copy2(entry / key, entry / "inputs.pristine" / file_name)
            out[f"inputs.pristine/{file_name}"] = out[key]
    return out


def _open_draw(entry: Path, bundle: ReferenceBundle, draw: int, digests: dict[str, str]) -> None:
    """Judge the current candidate on draw ``draw`` alone, through a view of the inputs.

    The view holds the seed sets, the weights and this draw's sets (linked from
    the kept inputs, its pristine copy likewise; the bundle keeps no other draw)
    and a policy naming only them: no candidate process sees another draw's
    inputs or seeds, so none can work out answers for a later candidate's sets.  The view's digests are the kept
    files' (``digests``, checked or computed under this use's lease), not hashed again.
    """
    groups = {s.group for s in bundle.input_sets if s.group >= 0}
    if groups and groups != {draw}:  # a bundle keeps the seeded sets and one draw, never more
        raise RuntimeError(f"reference bundle {entry.name} holds draws {groups}, not {draw}")
    bundle.draw = draw
    skip = {POLICY_FILE}
    view, pristine = entry / _VIEW, entry / _VIEW_PRISTINE
    for target in (view, pristine):
        shutil.rmtree(target, ignore_errors=True)
        target.mkdir()
    for source in sorted((entry / "inputs").iterdir()):
        if source.name in skip or not source.is_file():
            continue
        _link_or_copy(source, view / source.name)
        _link_or_copy(entry / "inputs.pristine" / source.name, pristine / source.name)
    seen = {p.name: digests.get(f"inputs/{p.name}", "") for p in view.glob("*.pt")}
    if (entry / "inputs" / POLICY_FILE).is_file():
        save_policy(view, bundle.policy)
        shutil.copy2(policy_path(view), policy_path(pristine))
        seen[POLICY_FILE] = file_digest(policy_path(view))
    bundle.inputs_dir = view
    bundle.pristine_dir = pristine
    bundle.input_digests = dict(sorted(seen.items()))


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


def _digests(entry: Path, keys: list[str] | None = None) -> dict[str, str]:
    """sha256 of these kept files (``<dir>/<file>``; default every one), several at once."""
    keys = _kept_files(entry) if keys is None else keys
    return dict(zip(keys, digest_files([entry / key for key in keys]), strict=True))


def _first_digests(entry: Path, bundle: ReferenceBundle) -> dict[str, str]:
    """The digests of every file a new bundle keeps, its inputs hashed once: the pristine
    copy was copied from them right after ``prepare_reference`` hashed them."""
    out = {f"{d}/{k}": v for d in _KEPT_DIRS[:2] for k, v in bundle.input_digests.items()}
    out.update(_digests(entry, [key for key in _kept_files(entry) if key not in out]))
    return dict(sorted(out.items()))


def _kept_files(entry: Path) -> list[str]:
    return [f"{name}/{p.name}" for name in _KEPT_DIRS for p in sorted((entry / name).glob("*.pt"))]


def _nbytes(entry: Path, digests: dict[str, str]) -> int:
    return sum((entry / key).stat().st_size for key in digests)


def _intact(entry: Path, record: KeptBundle) -> bool:
    """No kept file added or removed, and every one the next use reads unchanged.

    The next use reads everything but the latest draw's files, which it deletes
    unread: those are not hashed again (a draw's files cost as much as the rest).
    """
    if sorted(_kept_files(entry)) != sorted(record.digests):
        return False
    spent = {s.name for s in record.result.input_sets if s.group >= 0}
    read = [key for key in record.digests if _set_name(key.split("/", 1)[1]) not in spent]
    return _digests(entry, read) == {key: record.digests[key] for key in read}


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
