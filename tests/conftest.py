"""Shared fixtures: one real Temporal dev server per test session, a fresh queue per test."""

from __future__ import annotations

import os
import tempfile
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.testing import WorkflowEnvironment

from kernelopt.compiler_caches import CACHE_ENV
from kernelopt.config import Settings
from kernelopt.store import ArtifactStore, open_store
from tests.support.temporal import make_settings, start_server, temporal_binary_or_skip

# The gates' fixtures (a scratch KERNELOPT_HOME, the session's CPU zygote): tests of gates/
# and of the commands that run them (kernelopt verify) use them.
pytest_plugins = ["tests.support.gate_fixtures"]


def _has_cuda() -> bool:
    try:
        import torch

        return torch.cuda.is_available()
    except ImportError:
        return False


def pytest_configure(config: pytest.Config) -> None:
    """Where CUDA is present, tests run in one process (addopts asks pytest-xdist for more).

    GPU tests time kernels: two at once on one GPU would disturb each other's numbers.
    pytest-xdist reads these options after this hook (its own runs last).
    """
    if getattr(config.option, "dist", "no") != "no" and _has_cuda():
        config.option.dist, config.option.tx = "no", []
    _own_compiler_caches()


def _own_compiler_caches() -> None:
    """Each pytest-xdist worker compiles into caches of its own, as each GPU worker does.

    Two test processes writing one cache break the cache guard's premise
    (kernelopt/compiler_caches.py): a gate test read the other process's rewrite of
    a precompiled header as the candidate's and failed an honest one.  The gates
    hand the variables on to their sandboxed children.  The caches stay below the
    temporary directory (Triton's default is in the home, which the sandbox tests
    require to stay out of a child's view), or below the caches the caller named; not
    laid out as a GPU worker's, whose window record the cache guard keeps beside them.
    """
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if not worker:
        return
    for env, name in zip(CACHE_ENV, ("triton", "inductor"), strict=True):
        named = os.environ.get(env)
        own = (
            Path(named) / f"xdist-{worker}"
            if named
            else Path(tempfile.gettempdir()) / "kernelopt-test-caches" / name / worker
        )
        own.mkdir(parents=True, exist_ok=True)
        os.environ[env] = str(own)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """GPU tests run only where CUDA is present (the H200 host)."""
    if _has_cuda():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(autouse=True)
def gpu_pin_restored() -> Iterator[None]:
    """Building a GPU worker in-process pins the process (``CUDA_VISIBLE_DEVICES``); the next
    test in the same xdist worker must not inherit the pin (the proposer's activity picks a
    supervised child when pinned)."""
    saved = os.environ.get("CUDA_VISIBLE_DEVICES")
    yield
    if saved is None:
        os.environ.pop("CUDA_VISIBLE_DEVICES", None)
    else:
        os.environ["CUDA_VISIBLE_DEVICES"] = saved


@pytest.fixture(scope="session", autouse=True)
def remembered_proposals(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """GPU-doubles workers started by this session share the proposer's answers.

    See ``tests.support.gpu_doubles.propose_builtin_gpu_double``: the workers are
    child processes, so the folder travels in the environment.
    """
    folder = tmp_path_factory.mktemp("proposals")
    with pytest.MonkeyPatch.context() as env:
        env.setenv("KERNELOPT_DOUBLES_PROPOSALS", str(folder))
        yield folder


@pytest.fixture(scope="session")
def temporal_settings(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Settings]:
    settings = make_settings(tmp_path_factory.mktemp("kernelopt-home"))
    server = start_server(settings)
    yield settings
    server.stop()


@pytest.fixture(scope="session")
async def client(temporal_settings: Settings) -> AsyncIterator[Client]:
    from kernelopt.client import connect

    yield await connect(temporal_settings, start_embedded=False)


@pytest.fixture
def task_queue() -> str:
    return f"test-{uuid.uuid4().hex[:10]}"


@pytest.fixture
def store(temporal_settings: Settings, monkeypatch: pytest.MonkeyPatch) -> ArtifactStore:
    """The artifact store the workers of this session use (KERNELOPT_HOME points at it)."""
    monkeypatch.setenv("KERNELOPT_HOME", str(temporal_settings.home))
    return open_store(Path(temporal_settings.artifacts_dir))


@pytest.fixture(scope="module")
async def env() -> AsyncIterator[WorkflowEnvironment]:
    """A local Temporal test server per module (pydantic payloads), for workflow tests."""
    async with await WorkflowEnvironment.start_local(
        data_converter=pydantic_data_converter,
        dev_server_existing_path=temporal_binary_or_skip(),
        ui=False,
    ) as environment:
        yield environment
