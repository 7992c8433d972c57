"""Issue 8: the cpu worker image, run as a container, carries a campaign and stops cleanly.

The static checks (test_manifests.py) cannot tell whether the image builds, whether
its entrypoint finds `kernelopt`, whether uid 10001 can write the artifact volume, or
whether `docker stop` ends the worker gracefully through tini.  This test runs the
built image (``KERNELOPT_TEST_IMAGE``, default ``kernelopt-worker:cpu``) as the only
CPU worker of a fresh queue against this session's dev server, with the GPU activity
doubles in a host process, so the campaign can only finish if the container ran its
workflows and CPU activities.  It is skipped where no Docker engine or no image is
available (CI); ``scripts/docker_smoke.sh`` builds the image and runs it.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import time
import uuid
from pathlib import Path

import pytest

from kernelopt.campaigns import prepare_problem, start_campaign
from kernelopt.config import Settings
from kernelopt.contracts import Outcome, OutcomeCategory
from kernelopt.store import open_store
from tests.support.campaigns import small_options
from tests.support.processes import ROOT, WorkerProcess

PROBLEM = ROOT / "problems" / "level1" / "001_relu_chain.py"
IMAGE = os.environ.get("KERNELOPT_TEST_IMAGE", "kernelopt-worker:cpu")
SECRET = "sk-" + "d0c4e7ed" * 4  # in the container's environment only: never in its logs
IMAGE_UID = 10001  # deploy/Dockerfile: USER 10001:10001


def docker(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["docker", *args], capture_output=True, text=True, timeout=timeout, check=False
    )


@pytest.fixture(scope="module")
def image() -> str:
    if shutil.which("docker") is None:
        pytest.skip("no docker client")
    if docker("info", timeout=30).returncode != 0:
        pytest.skip("no Docker engine reachable")
    if docker("image", "inspect", IMAGE, timeout=30).returncode != 0:
        pytest.skip(f"image {IMAGE} not built (scripts/docker_smoke.sh builds it)")
    return IMAGE


def wait_for_log(container: str, needle: str, timeout: float) -> str:
    deadline = time.monotonic() + timeout
    logs = ""
    while time.monotonic() < deadline:
        result = docker("logs", container, timeout=30)
        logs = result.stdout + result.stderr
        if needle in logs:
            return logs
        if docker("inspect", "-f", "{{.State.Running}}", container).stdout.strip() != "true":
            break
        time.sleep(0.5)
    raise AssertionError(f"container never logged {needle!r}; logs:\n{logs[-3000:]}")


def files_owned_by(root: Path, uid: int) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file() and p.stat().st_uid == uid]


async def test_cpu_image_runs_a_campaign_and_stops_gracefully(
    image: str, temporal_settings: Settings, tmp_path: Path
) -> None:
    from kernelopt.client import connect

    # The host side (test, GPU doubles) writes the shared store world-writable, so the
    # image's uid 10001 can add to directories the host created, as on a shared volume.
    old_umask = os.umask(0)
    home = tmp_path / "home"
    home.mkdir(mode=0o777)
    settings = Settings(
        home=home,
        server_port=temporal_settings.server_port,
        ui_port=temporal_settings.ui_port,
        namespace=temporal_settings.namespace,
    )
    tag = uuid.uuid4().hex[:8]
    cpu_queue, gpu_queue = f"docker-cpu-{tag}", f"docker-gpu-{tag}"
    container = f"kernelopt-test-{tag}"
    gpu = None
    try:
        run = docker(
            "run", "-d", "--name", container, "--network", "host",
            "-v", f"{home}:/var/lib/kernelopt",
            "-e", f"KERNELOPT_TEMPORAL_ADDRESS={settings.address}",
            "-e", f"KERNELOPT_NAMESPACE={settings.namespace}",
            "-e", f"OPENAI_API_KEY={SECRET}",
            image, "worker", "--queue", "cpu", "--task-queue", cpu_queue,
        )  # fmt: skip
        assert run.returncode == 0, run.stderr
        wait_for_log(container, "cpu worker ready", timeout=120)
        gpu = WorkerProcess(settings, "gpu", gpu_queue).wait_ready()
        client = await connect(settings, start_embedded=False)
        problem = prepare_problem(PROBLEM, open_store(settings.artifacts_dir))
        handle = await start_campaign(client, problem, small_options(cpu_queue, gpu_queue))
        outcome = await asyncio.wait_for(
            client.get_workflow_handle(handle.id, result_type=Outcome).result(), 240
        )
        assert outcome.category == OutcomeCategory.OPTIMIZED, outcome.reason
        # the report is a CPU activity's artifact: written through the volume as uid 10001
        assert files_owned_by(settings.artifacts_dir, IMAGE_UID), "nothing written by the image"

        started = time.monotonic()
        stop = docker("stop", "-t", "60", container, timeout=90)
        stopped_in = time.monotonic() - started
        assert stop.returncode == 0, stop.stderr
        state = docker("inspect", "-f", "{{.State.ExitCode}} {{.State.OOMKilled}}", container)
        assert state.stdout.split() == ["0", "false"], (
            f"exit: {state.stdout} after {stopped_in:.1f} s"
        )
        result = docker("logs", container)
        logs = result.stdout + result.stderr
        assert "shutting down" in logs, logs[-2000:]
        assert SECRET not in logs
    finally:
        os.umask(old_umask)
        if gpu is not None:
            gpu.stop()
        docker("rm", "-f", container)
