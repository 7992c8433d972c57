"""The sandbox on a GPU host: CUDA works inside it, the network does not.

Run on the H200: ``pytest -q -m gpu tests/security/test_sandbox_gpu.py``
(bubblewrap from PATH or ``KERNELOPT_BWRAP``, e.g. a ``dpkg -x`` of the .deb).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from gates import sandbox
from gates.runner import fast_launch, run_job
from tests.security.test_hostile_candidates import CANDIDATES

pytestmark = pytest.mark.gpu

_PROBE = """
import json, socket, sys, torch
x = torch.arange(1024, device="cuda", dtype=torch.float32)
total = float((x * 2).sum().item())
try:
    socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=3).close()
    net = "connected"
except OSError as exc:
    net = type(exc).__name__
print(json.dumps({"sum": total, "net": net, "device": torch.cuda.get_device_name()}))
"""


@pytest.fixture
def listener() -> Iterator[socket.socket]:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(4)
    yield sock
    sock.close()


def test_a_sandboxed_process_runs_cuda_and_cannot_reach_loopback(
    listener: socket.socket, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("KERNELOPT_SANDBOX", raising=False)
    port = str(listener.getsockname()[1])
    argv, env = sandbox.wrap_command([sys.executable, "-c", _PROBE, port])
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=180, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert found["sum"] == float(sum(range(1024)) * 2)
    assert found["net"] == "ConnectionRefusedError"
    listener.setblocking(False)
    with pytest.raises(BlockingIOError):
        listener.accept()


def _job(tmp: Path, candidate: Path):
    import torch

    from gates.protocol import CandidateJob, InputSet, ModelSource

    problems = Path(__file__).parent.parent / "problems" / "gates"
    (tmp / "inputs").mkdir(exist_ok=True)
    (tmp / "outputs").mkdir(exist_ok=True)
    torch.save([torch.randn(64, 256)], tmp / "inputs" / "seed0.pt")
    return CandidateJob(
        model=ModelSource(
            kind="candidate",
            problem_path=str(problems / "swish_bias.py"),
            candidate_path=str(candidate),
        ),
        device="cuda",
        input_sets=[InputSet(name="seed0", seed=0)],
        inputs_dir=str(tmp / "inputs"),
        out_dir=str(tmp / "outputs"),
    )


def test_gate_jobs_run_on_cuda_sandboxed_spawned_and_forked(
    tmp_path: Path, listener: socket.socket, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("KERNELOPT_SANDBOX", raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-gpu-test-secret")
    honest = Path(__file__).parent.parent / "fixtures" / "candidates" / "gates" / "swish_fused.py"
    attack = tmp_path / "temporal_frontend.py"
    source = (CANDIDATES / "temporal_frontend.py").read_text()
    port = listener.getsockname()[1]
    attack.write_text(source.replace("BAIT: dict = {}", f'BAIT: dict = {{"port": {port}}}', 1))
    outcomes = {}
    outcomes["spawned"] = run_job(
        _job(tmp_path, honest), tmp_path / "s", timeout_s=300, device="cuda"
    )
    with fast_launch("cuda") as launched:
        assert launched, launched.note
        for name, candidate in (("forked", honest), ("forked_attack", attack)):
            outcomes[name] = run_job(
                _job(tmp_path, candidate), tmp_path / name, timeout_s=300, device="cuda"
            )
    assert outcomes["spawned"].ok, outcomes["spawned"].error_text()
    assert outcomes["forked"].ok, outcomes["forked"].error_text()
    assert outcomes["forked_attack"].error_type == "ConnectionRefusedError"
    listener.setblocking(False)
    with pytest.raises(BlockingIOError):
        listener.accept()
    assert "sk-gpu-test-secret" not in (tmp_path / "s" / "child.log").read_text()
    assert os.environ.get("KERNELOPT_SANDBOX") is None
