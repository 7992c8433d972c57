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
"""

from __future__ import annotations

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
    used: int = 0

    def text_for(self, messages: list[dict[str, Any]]) -> str:
        return self.respond(messages) if self.respond is not None else self.content


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

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
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


def completion(model: str, reply: Reply, content: str) -> dict[str, Any]:
    return {
        "id": f"chatcmpl-scripted-{int(time.time() * 1e6)}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content},
                "finish_reason": "stop",
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
            if not self.path.rstrip("/").endswith("/chat/completions"):
                self._send(
                    404, {"error": {"message": f"no route {self.path}", "type": "not_found"}}
                )
                return
            length = int(self.headers.get("Content-Length", "0"))
            body = json.loads(self.rfile.read(length) or b"{}")
            messages = body.get("messages", [])
            reply = server.pick(messages)
            server.record(
                Request(model=body.get("model", ""), messages=messages, body=body, reply=reply)
            )
            if reply is None:
                self._send(
                    500,
                    {
                        "error": {
                            "message": "scripted server: no scripted reply matches",
                            "type": "script",
                        }
                    },
                )
                return
            if reply.status != 200:
                self._send(
                    reply.status,
                    {"error": {"message": reply.content or "injected", "type": "injected"}},
                )
                return
            self._send(
                200, completion(body.get("model", "scripted"), reply, reply.text_for(messages))
            )

    return Handler
