"""Reply files, matched to the requests they answer and delivered through ``kernelopt reply``."""

from __future__ import annotations

import argparse
import tarfile
from pathlib import Path

from kernelopt.agents import reply_folder
from kernelopt.config import Settings
from kernelopt.errors import KernelOptError
from scripts.llm_eval.stream import Stream


def reply_files(source: Path, work: Path) -> list[Path]:
    """The reply files of a folder, or of a .tgz / .tar of them (plain files, names only)."""
    if source.is_dir():
        return sorted(p for p in source.iterdir() if p.is_file() and not p.name.startswith("."))
    if not source.is_file():
        raise KernelOptError(f"--replies {source} does not exist")
    target = work / "replies"
    target.mkdir(parents=True, exist_ok=True)
    with tarfile.open(source) as tar:
        for member in tar.getmembers():
            name = Path(member.name).name
            if not member.isfile() or not name or name.startswith("."):
                continue
            handle = tar.extractfile(member)
            if handle is not None:
                (target / name).write_bytes(handle.read())
    return sorted(target.iterdir())


def request_of(name: str, ids: set[str]) -> str | None:
    """The request id a reply file answers: ``ID``, ``ID.txt``, ``ID.md`` (the longest match)."""
    found = [rid for rid in ids if name == rid or name.startswith(rid + ".")]
    return max(found, key=len) if found else None


def known_requests(folder: reply_folder.Folders) -> dict[str, str]:
    """Every request id this home has seen -> where it is (requests / answered / withdrawn)."""
    where: dict[str, str] = {}
    for part in ("withdrawn", "answered", "requests"):  # the later wins
        directory = folder.root / part
        if directory.is_dir():
            for path in directory.glob("*.json"):
                where[path.stem] = part
    return where


async def deliver_replies(settings: Settings, files: list[Path], stream: Stream) -> tuple[int, int]:
    """Each reply through ``kernelopt reply``'s own code: written, then the search signalled."""
    from kernelopt.cli.llm_replies import cmd_reply

    folder = reply_folder.folders(settings.llm_dir)
    where = known_requests(folder)
    delivered = skipped = 0
    for path in files:
        rid = request_of(path.name, set(where))
        if rid is None or where[rid] != "requests":
            why = "no such request" if rid is None else f"request already {where[rid]}"
            stream.event("reply_skipped", file=path.name, why=why)
            skipped += 1
            continue
        try:
            await cmd_reply(argparse.Namespace(id=rid, file=path), settings)
        except KernelOptError as exc:
            stream.event("reply_skipped", file=path.name, why=str(exc)[:300])
            skipped += 1
            continue
        delivered += 1
        stream.event("reply_delivered", id=rid)
    return delivered, skipped
