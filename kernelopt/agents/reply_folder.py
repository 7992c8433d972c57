"""Reply-folder mode: each request is a self-contained file; a reply is a file with its id.

``$KERNELOPT_HOME/llm/requests/<id>.json`` holds everything an independent
model or an expert needs to answer: the full prompt messages, the role, the
reply format, and which campaign, target and round asked.  A reply is any
file ``replies/<id>`` or ``replies/<id>.<ext>`` (``kernelopt reply ID FILE``
writes one atomically).  Once collected, request and reply move to
``answered/``.  Paths are resolved from the settings at every call, never
stored in history, so a copied ``KERNELOPT_HOME`` keeps working elsewhere.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kernelopt.agents.chat import Message
from kernelopt.agents.deferred import PreparedRequest

PARTIAL_SUFFIXES = (".tmp", ".part", ".partial", ".swp")
HOW_TO_ANSWER = (
    "Answer the last user message as the assistant, in the reply format above. Write the "
    "reply as plain text to replies/{id}.md (next to requests/), or run "
    "`kernelopt reply {id} FILE`."
)


@dataclass(frozen=True)
class Folders:
    """A reply folder's root and the subfolders a request passes through (``folders`` names them)."""

    root: Path
    requests: Path
    replies: Path
    answered: Path

    def request_file(self, rid: str) -> Path:
        return self.requests / f"{rid}.json"


def folders(root: Path | None = None) -> Folders:
    """The folders of this process's settings (``$KERNELOPT_HOME/llm`` by default)."""
    if root is None:
        from kernelopt.config import Settings

        root = Settings.from_env().llm_dir
    return Folders(root, root / "requests", root / "replies", root / "answered")


def _write_atomic(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text)
    tmp.replace(path)


def request_document(req: PreparedRequest, messages: list[Message]) -> dict[str, Any]:
    return {
        "request_id": req.request_id,
        "role": req.role,
        "campaign_id": req.campaign_id,
        "target_id": req.target_id,
        "round": req.iteration,
        "workflow_id": req.workflow_id,
        "created_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "reply_format": req.reply_format,
        "how_to_answer": HOW_TO_ANSWER.format(id=req.request_id),
        "messages": messages,
    }


def write_request(f: Folders, req: PreparedRequest, messages: list[Message]) -> Path:
    """Write the request file once (a retried submit leaves an existing one alone)."""
    path = f.request_file(req.request_id)
    if not path.exists() and not (f.answered / path.name).exists():
        _write_atomic(path, json.dumps(request_document(req, messages), indent=1))
    f.replies.mkdir(parents=True, exist_ok=True)
    return path


def find_reply(f: Folders, rid: str) -> Path | None:
    """The reply file for ``rid`` (waiting in replies/, or already collected)."""
    for folder in (f.replies, f.answered):
        if not folder.is_dir():
            continue
        for path in sorted(folder.glob(f"{rid}*")):
            stem = path.name[len(rid) :]
            if folder == f.answered and not stem.startswith(".reply"):
                continue
            if stem and not stem.startswith("."):
                continue  # another id that merely starts with this one
            if path.is_file() and not path.name.endswith(PARTIAL_SUFFIXES):
                return path
    return None


def collect(f: Folders, rid: str, reply: Path) -> None:
    """Move request and reply to answered/: ``pending`` no longer lists it."""
    if reply.parent == f.answered:
        return
    f.answered.mkdir(parents=True, exist_ok=True)
    reply.replace(f.answered / f"{rid}.reply{reply.suffix or '.md'}")
    request = f.request_file(rid)
    if request.exists():
        request.replace(f.answered / request.name)


def withdraw(f: Folders, rids: list[str], reason: str) -> None:
    """Requests nobody needs any more (budget spent, search stopped) leave requests/."""
    for rid in rids:
        path = f.request_file(rid)
        if path.exists():
            data = json.loads(path.read_text())
            data["withdrawn"] = reason
            _write_atomic(f.root / "withdrawn" / path.name, json.dumps(data, indent=1))
            path.unlink()


def pending(f: Folders) -> list[dict[str, Any]]:
    """Requests still waiting for a reply, oldest first.  A worker moves a request away
    once its reply is taken, so a file listed here may be gone a moment later: skipped."""
    if not f.requests.is_dir():
        return []
    listed = [(_mtime(path), path) for path in f.requests.glob("*.json")]
    out = []
    for mtime, path in sorted((m, p) for m, p in listed if m is not None):
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if find_reply(f, data.get("request_id", path.stem)) is None:
            data["path"] = str(path)
            data["age_s"] = time.time() - mtime
            out.append(data)
    return out


def _mtime(path: Path) -> float | None:
    try:
        return path.stat().st_mtime
    except FileNotFoundError:
        return None


def deliver(f: Folders, rid: str, text: str) -> Path:
    """Write a reply for ``rid`` (atomically: a poll never reads half a file)."""
    path = f.replies / f"{rid}.md"
    _write_atomic(path, text)
    return path
