"""The command line run as a user runs it: ``python -m kernelopt.cli`` in a child process."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import Mapping, Sequence

import pytest

from kernelopt.cli import main
from tests.support.paths import ROOT


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


async def cli_in_process(capsys: pytest.CaptureFixture, *argv: str) -> tuple[int, str]:
    """``kernelopt ARGV`` in this process, off the event loop: its exit code and its output.

    For tests whose server and environment this process already holds (``cli_env``).
    """
    capsys.readouterr()
    code = await asyncio.to_thread(main, list(argv))
    return code, capsys.readouterr().out
