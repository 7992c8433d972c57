"""A campaign with an LLM proposer asks its endpoint first: real client, real HTTP."""

from __future__ import annotations

import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from kernelopt.agents.preflight import llm_endpoint_problem
from kernelopt.contracts.search import ProposerConfig, ProposerKind
from tests.support.cli import run_cli
from tests.support.scripted_openai import ScriptedOpenAI


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _config(base_url: str, key_env: str = "KERNELOPT_TEST_NO_KEY") -> ProposerConfig:
    return ProposerConfig(kind=ProposerKind.LLM, base_url=base_url, api_key_env=key_env)


class _Refusing(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = b'{"error": {"message": "invalid api key", "type": "invalid_request_error"}}'
        self.send_response(401)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


async def test_a_server_that_answers_is_reachable_even_without_a_model_list() -> None:
    with ScriptedOpenAI() as llm:  # chat completions only: GET /models is not served
        assert await llm_endpoint_problem(_config(llm.base_url)) is None


async def test_nothing_listening_is_a_one_line_reason() -> None:
    url = f"http://127.0.0.1:{_free_port()}/v1"
    problem = await llm_endpoint_problem(_config(url))
    assert problem is not None and problem.startswith("cannot reach llm:")
    assert url in problem and "\n" not in problem


async def test_a_refused_key_names_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KERNELOPT_TEST_KEY", "sk-wrong")
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Refusing)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/v1"
        problem = await llm_endpoint_problem(_config(url, "KERNELOPT_TEST_KEY"))
    finally:
        server.shutdown()
    assert problem is not None and "refused the API key (HTTP 401)" in problem
    assert "$KERNELOPT_TEST_KEY" in problem and "sk-wrong" not in problem


def test_optimize_refuses_an_unreachable_endpoint_before_submitting(tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{_free_port()}/v1"
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(tmp_path),
        "KERNELOPT_HOME": str(tmp_path / "home"),
        "KERNELOPT_TEMPORAL_ADDRESS": f"127.0.0.1:{_free_port()}",  # never contacted
    }
    done = run_cli(
        [
            "optimize",
            "problems/level1/001_relu_chain.py",
            "--proposer",
            "llm",
            "--llm-base-url",
            url,
            "--no-follow",
        ],
        env,
    )
    assert done.returncode == 2, done.stderr
    assert "LLM endpoint check failed: cannot reach" in done.stderr
    assert "Traceback" not in done.stderr
