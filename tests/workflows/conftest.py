"""The workflow tests' artifact store: a private KERNELOPT_HOME, as the test workers see it."""

from __future__ import annotations

import pytest

from kernelopt.store import ArtifactStore, open_store


@pytest.fixture
def store(tmp_path, monkeypatch) -> ArtifactStore:
    """The store under a fresh home, which the in-process activities open too."""
    monkeypatch.setenv("KERNELOPT_HOME", str(tmp_path / "home"))
    return open_store(tmp_path / "home" / "artifacts")
