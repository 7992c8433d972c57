"""Thin state archives: a compile's seed-drawn tensors stay behind and are drawn again on import.

A problem's captured arguments, inputs and init inputs are 20-600 MiB, while a
moved home may have to fit a small carry (a device call takes 64 MiB in all).
They are a pure function of the problem's source and seed, so ``kernelopt state
export --thin`` leaves them out -- but only those this machine has just drawn
again to the very digests the compile recorded -- and ``state import`` draws
them again and checks each digest before anything uses them.  The compile's
reference output stays behind too: restitch compares with it only when the
store holds it, and nothing else reads it.

What was left out, and each compile result needed to draw it again, is written
under the store's ``refs/thin-home/`` before the archive is made, so it travels
with the archive.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from kernelopt.cache_transfer import CacheScope
from kernelopt.config import Settings
from kernelopt.contracts.compiled import CompileResult
from kernelopt.log import get_logger
from kernelopt.state_transfer import (
    PhaseProgress,
    StateTransferError,
    TransferReport,
    export_state,
)
from kernelopt.store import ArtifactStore, open_store, write_atomic

log = get_logger(__name__)

# a compile's tensors that the problem's seed determines: drawn again on import
REDRAWN_FIELDS = ("args", "inputs", "init_inputs")
# read by nothing but restitch, which compares with it only when the store holds it
DROPPED_FIELDS = ("reference_output",)
RECORD_DIR = ("refs", "thin-home")  # under the artifact store: travels with the archive


class ThinHomeError(StateTransferError):
    """Tensors a thin archive left out could not be drawn again to their recorded digests."""


class Redrawable(BaseModel):
    """One compile result and which of its tensors this machine draws again bit for bit."""

    compiled: dict[str, Any]  # the CompileResult (the compile cache's entry) as JSON
    fields: list[str] = Field(default_factory=list)
    note: str = ""  # why none could be (its tensors then travel)


class LeftOut(BaseModel):
    """A blob a thin archive did not carry, and why."""

    path: str  # home-relative: artifacts/ab/ab12...
    sha256: str
    field: str  # a REDRAWN_FIELDS name (drawn again), a DROPPED_FIELDS name, or a caller's reason
    key: str = ""  # the compile's cache key, for the drawn ones


class CheckedCompile(BaseModel):
    """A compile checked for the first time by this export: what can be drawn again."""

    problem: str
    fields: list[str]
    note: str
    seconds: float


class ThinPlan(BaseModel):
    left_out: list[LeftOut] = Field(default_factory=list)
    checked: list[CheckedCompile] = Field(default_factory=list)

    @property
    def paths(self) -> list[str]:
        return [r.path for r in self.left_out]


class ThinExport(BaseModel):
    report: TransferReport
    plan: ThinPlan


class Redrawn(BaseModel):
    """What an import drew again (every digest matched, or it raised)."""

    blobs: int = 0
    seconds: float = 0.0


# --- export ------------------------------------------------------------------------------------
def export_thin(
    settings: Settings,
    archive: Path,
    *,
    also_leave_out: Mapping[str, str] | None = None,
    compiler_caches: CacheScope = "autotune",
    progress: PhaseProgress | None = None,
) -> ThinExport:
    """``export_state`` without the tensors an import can draw again (``plan_thin``)."""
    plan = plan_thin(settings, also_leave_out=also_leave_out)
    report = export_state(
        settings,
        archive,
        leave_out=plan.paths,
        compiler_caches=compiler_caches,
        progress=progress,
    )
    return ThinExport(report=report, plan=plan)


def plan_thin(settings: Settings, *, also_leave_out: Mapping[str, str] | None = None) -> ThinPlan:
    """What a thin archive of ``settings.home`` leaves behind, recorded in the store.

    Each compile in the home's compile cache is checked once (its verdict is kept
    under ``refs/thin-home/compiled/``): its seed-drawn tensors are left out only if
    they were drawn again here to the recorded digests.  ``also_leave_out`` maps
    further home-relative paths to a reason; they are not drawn again on import.
    """
    store = open_store(settings.artifacts_dir)
    compiled_dir = _record_dir(settings) / "compiled"
    compiled_dir.mkdir(parents=True, exist_ok=True)
    known = {
        p.stem: Redrawable.model_validate_json(p.read_text()) for p in compiled_dir.glob("*.json")
    }
    plan = ThinPlan()
    for path in sorted((settings.home / "compile_cache").glob("*.json")):
        try:
            compiled = CompileResult.model_validate_json(path.read_text())
        except (OSError, ValueError):
            continue  # being written: the next export takes it
        if compiled.cache_key in known:
            continue
        started = time.monotonic()
        entry = check_redrawable(compiled, store)
        write_atomic(compiled_dir / f"{compiled.cache_key}.json", entry.model_dump_json().encode())
        known[compiled.cache_key] = entry
        plan.checked.append(
            CheckedCompile(
                problem=compiled.problem.name,
                fields=entry.fields,
                note=entry.note,
                seconds=round(time.monotonic() - started, 1),
            )
        )
    records: dict[str, LeftOut] = {}
    for key, entry in known.items():
        compiled = CompileResult.model_validate(entry.compiled)
        for name in [*entry.fields, *DROPPED_FIELDS]:
            ref = getattr(compiled, name)
            if ref is not None and store.exists(ref):
                rel = _blob_rel(ref.sha256)
                records[rel] = LeftOut(path=rel, sha256=ref.sha256, field=name, key=key)
    for rel, reason in (also_leave_out or {}).items():
        if rel not in records and (settings.home / rel).is_file():
            records[rel] = LeftOut(path=rel, sha256=Path(rel).name, field=reason)
    plan.left_out = sorted(records.values(), key=lambda r: r.path)
    body = json.dumps([r.model_dump() for r in plan.left_out], indent=1).encode()
    write_atomic(_record_dir(settings) / "left_out.json", body)
    log.info("thin export planned", left_out=len(plan.left_out), checked=len(plan.checked))
    return plan


def check_redrawable(compiled: CompileResult, store: ArtifactStore) -> Redrawable:
    """Which tensors of ``compiled`` this machine draws again bit for bit (digests compared)."""
    entry = Redrawable(compiled=compiled.model_dump(mode="json"))
    if compiled.problem.kind.own_baseline or not compiled.arg_names:
        entry.note = (
            "not a Model file compiled by Inductor with named arguments: its tensors travel"
        )
        return entry
    try:
        values = seed_tensors(compiled, store)
    except Exception as exc:  # the problem's own code, or a changed file: its tensors travel
        entry.note = f"cannot draw them again: {type(exc).__name__}: {exc}"[:300]
        return entry
    for name in REDRAWN_FIELDS:
        ref = getattr(compiled, name)
        if ref is not None and _drawn(values[name], name)[0] == ref.sha256:
            entry.fields.append(name)
    return entry


def seed_tensors(compiled: CompileResult, store: ArtifactStore) -> dict[str, list]:
    """The compile's args, inputs and init inputs drawn again on the CPU from its seed."""
    from kernelopt.compile.rehydrate import drawn_from_seed
    from kernelopt.compile.tensors import clone_exact

    source = store.get_text(compiled.problem.source)
    problem, inputs, args = drawn_from_seed(compiled, source, "cpu")
    return {
        "args": args,
        "inputs": [clone_exact(x) for x in inputs],
        "init_inputs": problem.make_init_inputs(compiled.problem.seed),
    }


# --- import ------------------------------------------------------------------------------------
def left_out_records(settings: Settings) -> list[LeftOut]:
    """What the last thin export of this home left behind (empty for a full one)."""
    path = _record_dir(settings) / "left_out.json"
    if not path.is_file():
        return []
    return [LeftOut.model_validate(r) for r in json.loads(path.read_text())]


def redraw_left_out(settings: Settings) -> Redrawn:
    """Draw again every seed tensor the archive left out and the store lacks.

    A blob is written only once its digest matches the one recorded at export;
    any that does not (or cannot be drawn) raises ``ThinHomeError`` naming each,
    after the rest were written.
    """
    store = open_store(settings.artifacts_dir)
    wanted: dict[str, list[LeftOut]] = {}
    for record in left_out_records(settings):
        if record.field in REDRAWN_FIELDS and not store.exists(record.sha256):
            wanted.setdefault(record.key, []).append(record)
    started, drawn, failed, errors = time.monotonic(), 0, [], []
    for key, records in wanted.items():
        try:
            entry = Redrawable.model_validate_json(
                (_record_dir(settings) / "compiled" / f"{key}.json").read_text()
            )
            compiled = CompileResult.model_validate(entry.compiled)
            values = seed_tensors(compiled, store)
        except Exception as exc:  # the problem's own code ran here
            errors.append(f"compile {key[:12]}: {type(exc).__name__}: {exc}"[:300])
            continue
        for record in records:
            name = f"{compiled.problem.name}_{record.field}.pt"
            sha256, data = _drawn(values[record.field], name)
            if sha256 != record.sha256:
                failed.append(
                    f"{compiled.problem.name} {record.field}: drawn {sha256[:12]}, "
                    f"recorded {record.sha256[:12]}"
                )
                continue
            store.put_bytes(data, media_type="application/x-torch", name=name)
            drawn += 1
    seconds = round(time.monotonic() - started, 1)
    if errors:  # nothing says the tensors differ: the problem did not run here
        raise ThinHomeError(
            f"{len(errors)} left-out tensor set(s) could not be drawn again: the problem failed "
            f"to load or run here ({'; '.join(errors)}). Mend what the error names (this "
            "process's environment, a missing package) and import again; the archive is intact"
        )
    if failed:
        raise ThinHomeError(
            f"{len(failed)} left-out tensor set(s) did not come out of the problem's seed as "
            f"recorded at export ({'; '.join(failed)}): this machine draws other tensors "
            "(another torch or platform?). Export the home again without --thin"
        )
    log.info("left-out tensors drawn again", blobs=drawn, seconds=seconds)
    return Redrawn(blobs=drawn, seconds=seconds)


# --- helpers -----------------------------------------------------------------------------------
class _Held:
    """An artifact backend that only remembers the last blob written through it."""

    def __init__(self) -> None:
        self.data = b""

    def exists(self, sha256: str) -> bool:
        return False

    def read(self, sha256: str) -> bytes:
        raise KeyError(sha256)

    def write(self, sha256: str, data: bytes) -> None:
        self.data = data


def _drawn(values: list, name: str) -> tuple[str, bytes]:
    """The digest and bytes ``save_tensors`` would store for ``values``."""
    from kernelopt.compile.runtime import save_tensors

    held = _Held()
    ref = save_tensors(ArtifactStore(held), values, name)
    return ref.sha256, held.data


def _record_dir(settings: Settings) -> Path:
    return settings.artifacts_dir.joinpath(*RECORD_DIR)


def _blob_rel(sha256: str) -> str:
    return f"artifacts/{sha256[:2]}/{sha256}"  # the local store's layout, home-relative


__all__ = [
    "REDRAWN_FIELDS",
    "LeftOut",
    "Redrawable",
    "Redrawn",
    "ThinExport",
    "ThinHomeError",
    "ThinPlan",
    "check_redrawable",
    "export_thin",
    "left_out_records",
    "plan_thin",
    "redraw_left_out",
    "seed_tensors",
]
