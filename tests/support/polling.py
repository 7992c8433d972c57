"""Waiting in an async test for something another process or workflow does."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


async def until(check: Callable[[], T], timeout: float = 60.0, what: str = "condition") -> T:
    """``check()``'s first true value, asked every 0.2 s; AssertionError after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        await asyncio.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")
