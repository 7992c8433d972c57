"""What a call packs into $OUT: a thin ``home.tgz`` (``kernelopt state export --thin``), the waiting requests, the logs."""

from __future__ import annotations

import asyncio
import io
import re
import tarfile
import time
from pathlib import Path

from temporalio.client import Client
from temporalio.service import RPCError

from kernelopt.agents import reply_folder
from kernelopt.config import Settings
from kernelopt.errors import KernelOptError
from scripts.llm_eval.record import EvalCall, EvalManifest, save_manifest
from scripts.llm_eval.stream import Stream

LOG_TAIL_BYTES = 2 << 20  # per log file in logs.tgz
THIN_MIN_BYTES = 1 << 20  # tensor archives below this travel whatever they are


def _is_tensor_archive(path: Path) -> bool:
    """A ``torch.save`` file (a zip holding a ``data.pkl``)."""
    import zipfile

    try:
        with zipfile.ZipFile(path) as archive:
            return any(n.endswith("/data.pkl") or n == "data.pkl" for n in archive.namelist())
    except (zipfile.BadZipFile, OSError):
        return False


# an ArtifactRef as the pydantic converter writes it into a history, for one media type
NCU_REF = re.compile(rb'"sha256":"([0-9a-f]{64})","size":\d+,"media_type":"application/x-ncu-rep"')


async def diagnostic_refs(client: Client, manifest: EvalManifest) -> set[str]:
    """Digests of the raw Nsight Compute reports the campaigns' histories name.

    A search keeps its profile's raw ``.ncu-rep`` (MiBs each) for people to open;
    no later step reads it (prompts use the distilled numbers), so a thin home
    leaves it behind.
    """
    from kernelopt.audit.runs import campaign_histories

    found: set[str] = set()
    for problem in manifest.campaigns():
        for _, history in await campaign_histories(client, problem.campaign_id):
            if history is None:
                continue
            for event in history.events:
                found.update(m.decode() for m in NCU_REF.findall(event.SerializeToString()))
    return found


class Snapshotter:
    """``home.tgz`` in $OUT every ``every_s`` while running: a cut call can still be resumed."""

    def __init__(
        self,
        settings: Settings,
        stream: Stream,
        work: Path,
        every_s: float,
        client: Client,
        manifest: EvalManifest,
        call: EvalCall,
    ) -> None:
        self.settings, self.stream, self.work, self.every_s = settings, stream, work, every_s
        self.client, self.manifest, self.call = client, manifest, call
        self.last = time.monotonic()

    async def maybe(self, now: float) -> None:
        if self.every_s <= 0 or now - self.last < self.every_s:
            return
        self.last = now
        # the snapshot records this call so far: resumed after a cut, the record shows it
        self.call.seconds = round(self.stream.elapsed, 1)
        self.call.stopped = f"cut? last live snapshot at {self.stream.elapsed:.0f} s"
        save_manifest(self.settings, self.manifest)
        try:
            diagnostics = await diagnostic_refs(self.client, self.manifest)
            size = await asyncio.to_thread(
                export_home, self.settings, self.work, self.stream, False, diagnostics
            )
        except (KernelOptError, RPCError) as exc:
            self.stream.event("snapshot_failed", error=str(exc)[:300])
            return
        self.stream.event("snapshot", bytes=size, note="a live snapshot: resume it if cut")


def export_home(
    settings: Settings,
    work: Path,
    stream: Stream,
    all_finished: bool,
    diagnostics: set[str] = frozenset(),
) -> int:
    """``kernelopt state export --thin`` into the work dir, then $OUT/home.tgz.

    Beside the seed-drawn tensors and reference outputs the product leaves out,
    the raw Nsight Compute reports (``diagnostics``) stay behind, and once every
    campaign has finished so does every tensor archive over THIN_MIN_BYTES:
    nothing runs again, and the report reads histories and small files.
    """
    from kernelopt.thin_home import export_thin

    archive = work / "home.tgz"
    also = dict.fromkeys((_blob_rel(sha256) for sha256 in diagnostics), "ncu report")
    if all_finished:
        for path in settings.artifacts_dir.glob("??/*"):
            if path.stat().st_size >= THIN_MIN_BYTES and _is_tensor_archive(path):
                also.setdefault(path.relative_to(settings.home).as_posix(), "finished")
    thin = export_thin(settings, archive, also_leave_out=also)
    for checked in thin.plan.checked:
        stream.event("regenerable", **checked.model_dump())
    report = thin.report
    stream.put("home.tgz", archive)
    m = report.manifest
    largest = sorted(m.files, key=lambda f: f.size, reverse=True)[:5]
    stream.event(
        "exported",
        bytes=report.archive.stat().st_size,
        files=len(m.files),
        parts={p.part: p.bytes for p in report.parts},
        left_out=len(m.left_out),
        left_out_bytes=sum(_blob_size(settings, p) for p in m.left_out),
        largest_kept=[f"{f.path} {f.size}" for f in largest],
    )
    return report.archive.stat().st_size


def _blob_rel(sha256: str) -> str:
    return f"artifacts/{sha256[:2]}/{sha256}"  # the local store's layout, home-relative


def _blob_size(settings: Settings, rel: str) -> int:
    path = settings.home / rel
    return path.stat().st_size if path.is_file() else 0


def pack_requests(settings: Settings, stream: Stream, work: Path) -> list[str]:
    """The requests still waiting, one ``ID.json`` each, as ``requests.tgz``."""
    folder = reply_folder.folders(settings.llm_dir)
    waiting = reply_folder.pending(folder)
    path = work / "requests.tgz"
    with tarfile.open(path, "w:gz") as tar:
        for doc in waiting:
            tar.add(doc["path"], arcname=Path(doc["path"]).name)
    stream.put("requests.tgz", path)
    return [d["request_id"] for d in waiting]


def pack_logs(settings: Settings, stream: Stream, work: Path) -> None:
    """Server and worker logs (their last LOG_TAIL_BYTES each) as ``logs.tgz``."""
    files = [settings.server_dir / "server.log", *sorted((settings.home / "workers").glob("*.log"))]
    path = work / "logs.tgz"
    with tarfile.open(path, "w:gz") as tar:
        for log in files:
            if not log.is_file():
                continue
            with log.open("rb") as handle:
                handle.seek(max(0, log.stat().st_size - LOG_TAIL_BYTES))
                data = handle.read()
            info = tarfile.TarInfo(log.relative_to(settings.home).as_posix())
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    stream.put("logs.tgz", path)
