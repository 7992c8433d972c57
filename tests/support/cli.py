"""The command line run as a user runs it: ``python -m kernelopt.cli`` in a child process."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest

from kernelopt.cli import main
from kernelopt.config import Settings
from tests.support.paths import ROOT
from tests.support.temporal import env_for, make_settings


def run_cli(
    args: Sequence[str], env: Mapping[str, str], *, timeout: float = 120, **kw
) -> subprocess.CompletedProcess:
    """``python -m kernelopt.cli ARGS`` from the repository root, its output captured as text."""
    return subprocess.run(
        [sys.executable, "-m", "kernelopt.cli", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        **kw,
    )


def start_cli(args: Sequence[str], env: Mapping[str, str], **kw) -> subprocess.Popen:
    """``python -m kernelopt.cli ARGS`` started from the repository root; stderr piped as text."""
    return subprocess.Popen(
        [sys.executable, "-m", "kernelopt.cli", *args],
        cwd=ROOT,
        env=env,
        stderr=subprocess.PIPE,
        text=True,
        **kw,
    )


def start_optimize_without_gpu(
    tmp_path: Path, **kw
) -> tuple[Settings, dict[str, str], subprocess.Popen]:
    """``kernelopt optimize`` of the ReLU chain, its home under ``tmp_path``, no GPU visible.

    Its settings, its environment and the started process; ``kw`` go to ``start_cli``.
    """
    settings = make_settings(tmp_path / "home")
    env = {**env_for(settings), "CUDA_VISIBLE_DEVICES": ""}
    return settings, env, start_cli(["optimize", "problems/level1/001_relu_chain.py"], env, **kw)


async def cli_in_process(capsys: pytest.CaptureFixture, *argv: str) -> tuple[int, str]:
    """``kernelopt ARGV`` in this process, off the event loop: its exit code and its output.

    For tests whose server and environment this process already holds (``cli_env``).
    """
    capsys.readouterr()
    code = await asyncio.to_thread(main, list(argv))
    return code, capsys.readouterr().out
