"""The profiler runs candidate code too: ncu and the harness runner run in the gate sandbox.

No CUDA here, so a fake ``ncu`` (a Python script) stands in for the profiler:
run through ``run_ncu`` for real, it reports what it could reach.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import socket
import sys
import tempfile
from pathlib import Path

import pytest

from gates import sandbox
from kernelopt.profiling import ncu as ncu_mod

SECRET = "sk-profiler-must-not-see-this"

FAKE_NCU = """#!{python}
import json, os, socket, sys
found = {{"argv": sys.argv[1:], "env_key": os.environ.get("OPENAI_API_KEY", "")}}
try:
    socket.create_connection(("127.0.0.1", {port}), timeout=2).close()
    found["network"] = "connected"
except OSError as exc:
    found["network"] = type(exc).__name__
for name, path in (("own_blob", {own!r}), ("other_blob", {other!r})):
    try:
        found[name] = open(path).read()
    except OSError as exc:
        found[name] = type(exc).__name__
with open({out!r}, "w") as handle:
    json.dump(found, handle)
"""


@pytest.fixture
def sandbox_on(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(sandbox.SANDBOX_ENV, raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    try:
        sandbox.require()
    except sandbox.SandboxUnavailable as exc:
        pytest.skip(f"no working bubblewrap here: {exc}")


def _blob(root: Path, data: bytes) -> Path:
    digest = hashlib.sha256(data).hexdigest()
    path = root / digest[:2] / digest
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


def test_run_ncu_runs_the_wrapped_command(
    sandbox_on: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: dict = {}

    def fake_run(cmd: list[str], **kwargs: object):
        seen["cmd"], seen["env"] = cmd, kwargs.get("env")
        raise OSError("not really")

    monkeypatch.setattr(ncu_mod.subprocess, "run", fake_run)
    harness = tmp_path / "harness" / "h.py"
    harness.parent.mkdir()
    harness.write_text("")
    run = ncu_mod.run_ncu(harness, tmp_path, ncu="/opt/fake/ncu")
    assert not run.ok and "could not start" in run.note
    cmd = seen["cmd"]
    assert Path(cmd[0]).name == "bwrap" and ("--unshare-net" in cmd or "--unshare-all" in cmd)
    inner = cmd[len(cmd) - cmd[::-1].index("--") :]
    assert inner[0] == "/opt/fake/ncu" and inner[-3:] == [str(harness), "--mode", "ncu"]
    assert "OPENAI_API_KEY" not in seen["env"]


def test_a_fake_profiler_reaches_neither_the_network_nor_the_store(
    sandbox_on: None, tmp_path: Path
) -> None:
    # Not under /tmp: the sandbox has its own /tmp (pytest's tmp_path lives there).
    home = Path(tempfile.mkdtemp(prefix="kernelopt-ncu-", dir="/var/tmp"))
    try:
        store = home / "artifacts"
        own = _blob(store, b"the wrapper this harness profiles")
        other = _blob(store, b"weights of another campaign " + SECRET.encode())
        work = home / "work"
        (work / "harness").mkdir(parents=True)
        harness = work / "harness" / "harness_captured.py"
        harness.write_text("")
        digest = own.name
        (work / "harness" / "compiled.json").write_text(json.dumps({"wrapper": {"sha256": digest}}))
        listener = socket.socket()
        listener.bind(("127.0.0.1", 0))
        listener.listen(4)
        out = work / "fake.json"
        tool = home / "nsight" / "ncu"
        tool.parent.mkdir()
        tool.write_text(
            FAKE_NCU.format(
                python=sys.executable,
                port=listener.getsockname()[1],
                own=str(own),
                other=str(other),
                out=str(out),
            )
        )
        tool.chmod(0o755)
        run = ncu_mod.run_ncu(harness, work, ncu=str(tool), timeout_s=60, store_root=store)
        assert not run.ok  # the fake writes no report
        found = json.loads(out.read_text())
        assert found["argv"][-3:] == [str(harness), "--mode", "ncu"]
        assert found["env_key"] == ""
        assert found["network"] in ("ConnectionRefusedError", "OSError")
        listener.setblocking(False)
        with pytest.raises(BlockingIOError):
            listener.accept()
        assert found["own_blob"] == "the wrapper this harness profiles"
        assert found["other_blob"] == "FileNotFoundError"
        listener.close()
    finally:
        shutil.rmtree(home, ignore_errors=True)


def test_the_toolkit_launcher_sees_the_nsight_compute_install_it_execs(tmp_path: Path) -> None:
    """The CUDA toolkit's ``bin/ncu`` is a launcher script that execs the real ncu from an
    ``nsight-compute*`` folder beside the toolkit or under /opt/nvidia (on the H200 the
    sandboxed launcher said "nsight-compute directory is not found"): both are bound."""
    toolkit = tmp_path / "cuda-13.0"
    (toolkit / "bin").mkdir(parents=True)
    launcher = toolkit / "bin" / "ncu"
    launcher.write_text("#!/bin/sh\n")
    beside = toolkit / "nsight-compute-2025.3.1"
    beside.mkdir()
    opt = tmp_path / "opt-nvidia"
    under_opt = opt / "nsight-compute" / "2025.3.1"
    under_opt.mkdir(parents=True)
    dirs = ncu_mod.tool_dirs(str(launcher), opt_root=opt)
    assert dirs == [toolkit, beside, opt / "nsight-compute"]
    assert ncu_mod.tool_dirs(str(launcher), opt_root=tmp_path / "none") == [toolkit, beside]
