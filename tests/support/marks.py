"""Parametrisations whose repeats run only with ``pytest -m slow``."""

from __future__ import annotations

from typing import Any

import pytest


def slow(*values: Any) -> list[Any]:
    """``values`` as parameters marked slow: the default run keeps a representative."""
    return [pytest.param(value, marks=pytest.mark.slow) for value in values]
