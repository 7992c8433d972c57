"""Durability fixtures: one undisturbed reference campaign for the whole session.

Every fault test compares its campaigns with an undisturbed one run with the
default ``support.options`` (decisions and outcome do not depend on the server
or the workers that ran it), so the reference is run once, not once per test.
"""

from __future__ import annotations

import pytest
from temporalio.client import Client

from kernelopt.audit.model import AuditReport
from kernelopt.config import Settings
from tests.durability.support import reference_report
from tests.support.temporal import env_for


@pytest.fixture(scope="session")
async def reference(
    client: Client, temporal_settings: Settings, tmp_path_factory: pytest.TempPathFactory
) -> AuditReport:
    """An undisturbed campaign with the default options: what every faulty run must reproduce."""
    return await reference_report(client, temporal_settings, tmp_path_factory.mktemp("reference"))


@pytest.fixture
def cli_env(temporal_settings: Settings, monkeypatch: pytest.MonkeyPatch) -> None:
    """The CLI reads its server from the environment, like a user's shell."""
    env = env_for(temporal_settings)
    for key in (
        "KERNELOPT_HOME",
        "KERNELOPT_SERVER_PORT",
        "KERNELOPT_UI_PORT",
        "KERNELOPT_NAMESPACE",
    ):
        monkeypatch.setenv(key, env[key])
    monkeypatch.delenv("KERNELOPT_TEMPORAL_ADDRESS", raising=False)
    monkeypatch.setenv("COLUMNS", "300")  # tables wide enough that ids are not folded
