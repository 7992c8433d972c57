"""Test marks: parametrisations whose repeats run only with ``pytest -m slow``, and modules
whose gate children fork from the session's CPU zygote."""

from __future__ import annotations

from typing import Any

import pytest


def slow(*values: Any) -> list[Any]:
    """``values`` as parameters marked slow: the default run keeps a representative."""
    return [pytest.param(value, marks=pytest.mark.slow) for value in values]


# A module's gate children fork from the session's CPU zygote (``cpu_launcher``): for tests
# that do not check how a child starts, since a spawned one imports torch afresh (the spawned
# start has tests of its own: tests/gates/test_isolation_primitives.py, tests/security).
forked_children = pytest.mark.usefixtures("cpu_launcher")
