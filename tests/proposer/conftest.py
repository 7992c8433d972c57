"""Template kernels run under the Triton interpreter on small CPU tensors."""

import os

import pytest

os.environ.setdefault("TRITON_INTERPRET", "1")  # read when a @triton.jit function is defined


@pytest.fixture(autouse=True)
def _interpret(monkeypatch: pytest.MonkeyPatch) -> None:
    """Also while each test runs: earlier test modules may have restored another value."""
    monkeypatch.setenv("TRITON_INTERPRET", "1")
