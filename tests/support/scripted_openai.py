"""A local OpenAI-compatible HTTP server that replays scripted chat-completion replies.

Test code.  It speaks enough of ``POST /v1/chat/completions`` for the real
``openai`` client: the request goes over real HTTP, the reply is a real JSON
completion with ``usage`` numbers, so parsing, the token ledger and the
retry-fix loop run exactly as against a production endpoint.

A script is a list of ``Reply`` rules.  Each request takes the first unused
rule whose ``match`` text occurs in the request's messages (system + user +
assistant text, so a retry-fix request can be matched by the feedback it
carries); rules with ``repeat=True`` are never used up, and ``respond`` computes the
content from the request (e.g. a kernel that embeds which plan it answers).  A ``Reply`` may
instead carry an HTTP ``status`` to inject a failure (429, 500, 401 ...).
Every request is recorded for assertions.  No rule matches -> HTTP 500 with
an explanation, which makes a missing script line loud.

``reject_params`` makes the server refuse, with OpenAI's HTTP 400 shape, any
request carrying one of those parameters (a reasoning model's ``max_tokens``,
``temperature``).  The Batch API (``/v1/files``, ``/v1/batches``, the output
file's ``/v1/files/{id}/content``) runs each uploaded line through the same
script; a batch stays ``in_progress`` until ``hold_batches`` is cleared, so a
test decides how long the workflow must wait.
"""

from __future__ import annotations

import email.parser
import itertools
import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Reply:
    content: str = ""
    match: str = ""  # substring of the request's messages; "" matches anything
    prompt_tokens: int = 100
    completion_tokens: int = 50
    status: int = 200  # non-200: an injected HTTP error (content is the error message)
    repeat: bool = False
    respond: Callable[[list[dict[str, Any]]], str] | None = None  # content from the request
    finish_reason: str = "stop"  # "length": a reply cut at the output limit
    used: int = 0

    def text_for(self, messages: list[dict[str, Any]]) -> str:
        return self.respond(messages) if self.respond is not None else self.content


SUMMARIZER = "Outcomes, one line per candidate"  # only the summariser's request says this
TRIED = "Plans already tried"  # a later round's planner request lists what was tried
NO_LESSONS = '{"entries": []}'  # a summariser reply that adds nothing to memory


def plans_json(*plans: tuple[str, str]) -> str:
    """A planner's answer: one plan per (direction, description)."""
    return json.dumps({"plans": [{"direction": d, "description": s} for d, s in plans]})


def planner(
    n: int, *plans: tuple[str, str], later: tuple[tuple[str, str], ...] = (), **kw: Any
) -> Reply:
    """The reply to "Propose up to ``n`` plans"; with ``later``, every request of a later
    round (one that lists the plans already tried) gets those plans instead."""
    match = f"Propose up to {n} plans"
    if not later:
        return Reply(match=match, content=plans_json(*plans), **kw)
    first, then = plans_json(*plans), plans_json(*later)
    return Reply(
        match=match, respond=lambda m: then if TRIED in str(m) else first, repeat=True, **kw
    )


def executor(direction: str, **kw: Any) -> Reply:
    """The reply to the executor request of the plan ``direction``."""
    return Reply(match=f"Plan ({direction})", **kw)


def summarizer(content: str = NO_LESSONS, **kw: Any) -> Reply:
    return Reply(match=SUMMARIZER, content=content, **kw)


@dataclass
class Request:
    model: str
    messages: list[dict[str, Any]]
    body: dict[str, Any]
    reply: Reply | None

    @property
    def text(self) -> str:
        return "\n".join(str(m.get("content", "")) for m in self.messages)


@dataclass
class ScriptedOpenAI:
    """``with ScriptedOpenAI([Reply(...), ...]) as server: server.base_url``."""

    script: list[Reply] = field(default_factory=list)
    requests: list[Request] = field(default_factory=list)
    port: int = 0  # 0: any free port; a fixed one lets a restarted script serve the same URL
    reject_params: dict[str, str] = field(default_factory=dict)  # param -> the 400's message
    hold_batches: bool = False  # batches stay in_progress while set
    files: dict[str, bytes] = field(default_factory=dict)
    batches: dict[str, dict[str, Any]] = field(default_factory=dict)
    batch_polls: int = 0

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # --- lifecycle ------------------------------------------------------------------------
    def start(self) -> ScriptedOpenAI:
        handler = _make_handler(self)
        self._server = ThreadingHTTPServer(("127.0.0.1", self.port), handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> ScriptedOpenAI:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def base_url(self) -> str:
        if self._server is None:
            raise RuntimeError("server not started")
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/v1"

    # --- scripting ------------------------------------------------------------------------
    def add(self, *replies: Reply) -> None:
        with self._lock:
            self.script.extend(replies)

    def pick(self, messages: list[dict[str, Any]]) -> Reply | None:
        text = "\n".join(str(m.get("content", "")) for m in messages)
        with self._lock:
            for reply in self.script:
                if (reply.repeat or reply.used == 0) and reply.match in text:
                    reply.used += 1
                    return reply
        return None

    def unused(self) -> list[Reply]:
        return [r for r in self.script if not r.repeat and r.used == 0]

    def record(self, request: Request) -> None:
        with self._lock:
            self.requests.append(request)

    def rejection(self, body: dict[str, Any]) -> dict[str, Any] | None:
        """OpenAI's 400 for a parameter this 'model' does not accept, else None."""
        for param, message in self.reject_params.items():
            if param in body:
                return {
                    "error": {
                        "message": message,
                        "type": "invalid_request_error",
                        "param": param,
                        "code": "unsupported_parameter",
                    }
                }
        return None

    def chat(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        """One chat completion: (HTTP status, JSON body)."""
        rejected = self.rejection(body)
        messages = body.get("messages", [])
        reply = None if rejected else self.pick(messages)
        self.record(Request(model=body.get("model", ""), messages=messages, body=body, reply=reply))
        if rejected:
            return 400, rejected
        if reply is None:
            message = "scripted server: no scripted reply matches"
            return 500, {"error": {"message": message, "type": "script"}}
        if reply.status != 200:
            return reply.status, {
                "error": {"message": reply.content or "injected", "type": "injected"}
            }
        return 200, completion(body.get("model", "scripted"), reply, reply.text_for(messages))

    # --- Batch API ------------------------------------------------------------------------
    def new_id(self, prefix: str) -> str:
        with self._lock:
            return f"{prefix}-{next(self._ids)}"

    def add_file(self, data: bytes, filename: str, purpose: str) -> dict[str, Any]:
        file_id = self.new_id("file")
        with self._lock:
            self.files[file_id] = data
        return _file_object(file_id, len(data), filename, purpose)

    def create_batch(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        if body.get("input_file_id") not in self.files:
            return 400, {"error": {"message": "no such input file", "type": "invalid_request"}}
        batch = {
            "id": self.new_id("batch"),
            "object": "batch",
            "endpoint": body.get("endpoint", ""),
            "input_file_id": body["input_file_id"],
            "completion_window": body.get("completion_window", "24h"),
            "status": "in_progress",
            "created_at": int(time.time()),
            "metadata": body.get("metadata") or {},
            "request_counts": {"total": 0, "completed": 0, "failed": 0},
        }
        with self._lock:
            self.batches[batch["id"]] = batch
        return 200, batch

    def batch_status(self, batch_id: str) -> tuple[int, dict[str, Any]]:
        with self._lock:
            batch = self.batches.get(batch_id)
            self.batch_polls += 1
        if batch is None:
            return 404, {"error": {"message": f"no batch {batch_id}", "type": "not_found"}}
        if batch["status"] == "in_progress" and not self.hold_batches:
            self._run_batch(batch)
        return 200, batch

    def _run_batch(self, batch: dict[str, Any]) -> None:
        """Answer every line through the script, as an endpoint's batch runner would."""
        out, errors, counts = [], [], {"total": 0, "completed": 0, "failed": 0}
        for line in self.files[batch["input_file_id"]].decode().splitlines():
            if not line.strip():
                continue
            item = json.loads(line)
            counts["total"] += 1
            status, body = self.chat(item["body"])
            record = {"id": self.new_id("resp"), "custom_id": item["custom_id"]}
            if status == 200:
                counts["completed"] += 1
                out.append({**record, "response": {"status_code": 200, "body": body}})
            else:
                counts["failed"] += 1
                errors.append({**record, "response": {"status_code": status, "body": body}})
        batch["request_counts"] = counts
        if out:
            data = "".join(json.dumps(r) + "\n" for r in out).encode()
            batch["output_file_id"] = self.add_file(data, "output.jsonl", "batch_output")["id"]
        if errors:
            data = "".join(json.dumps(r) + "\n" for r in errors).encode()
            batch["error_file_id"] = self.add_file(data, "errors.jsonl", "batch_output")["id"]
        batch["status"] = "completed"
        batch["completed_at"] = int(time.time())

    def cancel_batch(self, batch_id: str) -> tuple[int, dict[str, Any]]:
        with self._lock:
            batch = self.batches.get(batch_id)
            if batch is not None and batch["status"] == "in_progress":
                batch["status"] = "cancelled"
        if batch is None:
            return 404, {"error": {"message": f"no batch {batch_id}", "type": "not_found"}}
        return 200, batch


def _file_object(file_id: str, size: int, filename: str, purpose: str) -> dict[str, Any]:
    return {
        "id": file_id,
        "object": "file",
        "bytes": size,
        "created_at": int(time.time()),
        "filename": filename,
        "purpose": purpose,
        "status": "processed",
    }


def _multipart(content_type: str, data: bytes) -> dict[str, tuple[str, bytes]]:
    """Form fields of a multipart/form-data body: name -> (filename, bytes)."""
    head = f"Content-Type: {content_type}\r\nMIME-Version: 1.0\r\n\r\n".encode()
    message = email.parser.BytesParser().parsebytes(head + data)
    fields: dict[str, tuple[str, bytes]] = {}
    for part in message.get_payload() if message.is_multipart() else []:
        name = part.get_param("name", header="content-disposition") or ""
        filename = part.get_filename() or ""
        fields[str(name)] = (filename, part.get_payload(decode=True) or b"")
    return fields


def completion(model: str, reply: Reply, content: str) -> dict[str, Any]:
    """A chat.completion JSON body for ``content``."""
    return {
        "id": f"chatcmpl-scripted-{int(time.time() * 1e6)}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content},
                "finish_reason": reply.finish_reason,
            }
        ],
        "usage": {
            "prompt_tokens": reply.prompt_tokens,
            "completion_tokens": reply.completion_tokens,
            "total_tokens": reply.prompt_tokens + reply.completion_tokens,
        },
    }


def _make_handler(server: ScriptedOpenAI) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:  # quiet test output
            return

        def _send(self, status: int, payload: dict[str, Any]) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", "0"))
            raw = self.rfile.read(length) if length else b""
            path = self.path.rstrip("/")
            if path.endswith("/chat/completions"):
                self._send(*server.chat(json.loads(raw or b"{}")))
            elif path.endswith("/v1/files"):
                fields = _multipart(self.headers.get("Content-Type", ""), raw)
                filename, data = fields.get("file", ("", b""))
                purpose = fields.get("purpose", ("", b"batch"))[1].decode()
                self._send(200, server.add_file(data, filename, purpose))
            elif path.endswith("/v1/batches"):
                self._send(*server.create_batch(json.loads(raw or b"{}")))
            elif path.endswith("/cancel") and "/v1/batches/" in path:
                self._send(*server.cancel_batch(path.split("/")[-2]))
            else:
                self._send(
                    404, {"error": {"message": f"no route {self.path}", "type": "not_found"}}
                )

        def do_GET(self) -> None:
            path = self.path.split("?")[0].rstrip("/")
            parts = path.split("/")
            if "/v1/batches/" in path:
                self._send(*server.batch_status(parts[-1]))
            elif path.endswith("/v1/batches"):
                data = list(server.batches.values())
                self._send(200, {"object": "list", "data": data, "has_more": False})
            elif "/v1/files/" in path and path.endswith("/content"):
                data = server.files.get(parts[-2])
                if data is None:
                    self._send(404, {"error": {"message": "no such file", "type": "not_found"}})
                    return
                self.send_response(200)
                self.send_header("Content-Type", "application/octet-stream")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
            else:
                self._send(
                    404, {"error": {"message": f"no route {self.path}", "type": "not_found"}}
                )

    return Handler
