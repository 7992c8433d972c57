"""Gate-test fixtures: small problem sizes for the CPU, a private KERNELOPT_HOME, zygotes."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from gates.runner import forking_from, probe_zygote, verified_zygote, zygote_env
from gates.zygote import Zygote


@pytest.fixture(scope="session")
def gates_env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Children inherit this environment: small problem sizes (CPU), a scratch home."""
    home = tmp_path_factory.mktemp("gates-home")
    with pytest.MonkeyPatch.context() as env:  # restored when the session ends
        env.setenv("KERNELOPT_GATES_SMALL", "1")
        env.setenv("KERNELOPT_HOME", str(home))
        yield home


@pytest.fixture(scope="session")
def cpu_zygote(gates_env: Path) -> Iterator[Zygote | None]:
    """One verified CPU zygote for the session, started once and registered by nobody.

    Only tests that ask (``cpu_launcher``) fork from it: a test that spawns its
    children, wherever it runs in the session, never meets it.
    """
    with verified_zygote("cpu") as (zygote, _):
        yield zygote


@pytest.fixture
def cpu_launcher(cpu_zygote: Zygote | None) -> Iterator[bool]:
    """This test's gate jobs fork from the session's CPU zygote (children still start fresh)."""
    with forking_from("cpu", cpu_zygote):
        yield cpu_zygote is not None


@pytest.fixture(scope="module")
def unsandboxed_zygote(gates_env: Path) -> Iterator[Zygote]:
    """A CPU zygote started without bubblewrap, for one module's unsandboxed tests.

    Spawning a fresh interpreter per gate child (torch and Triton imported each
    time) costs seconds a child; how a child starts does not change the
    parent-side checks those tests make.  The spawned path has tests of its own
    (tests/gates/test_isolation_primitives.py, tests/security).
    """
    with pytest.MonkeyPatch.context() as env:
        env.setenv("KERNELOPT_SANDBOX", "off")
        zygote = Zygote(zygote_env("cpu"), start_timeout_s=90.0)
        try:
            probe = probe_zygote(zygote, "cpu")
            assert probe.ok, probe.describe()
        except BaseException:
            zygote.close()
            raise
    yield zygote
    zygote.close()


@pytest.fixture
def unsandboxed(monkeypatch: pytest.MonkeyPatch, unsandboxed_zygote: Zygote) -> Iterator[None]:
    """Children without bubblewrap (from an unsandboxed zygote, not the session's sandboxed one).

    With the sandbox, rewrites of the reference or the candidate's files are refused
    outright (the files are not writable in the child's view: tests/security); these
    tests check the parent-side detection and repair behind it, which must hold on its own.
    Registered as ``cpu_launcher`` registers (``forking_from``), so each restores what it
    replaced whatever order their teardowns run in.
    """
    monkeypatch.setenv("KERNELOPT_SANDBOX", "off")
    with forking_from("cpu", unsandboxed_zygote):
        yield
