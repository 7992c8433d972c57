"""Typed failures.  Deterministic ones must not be retried; the rest are infrastructure.

The activity layer maps ``DeterministicError`` to a non-retryable Temporal
``ApplicationError`` (retrying a syntax error for 66 hours helps nobody) and
everything else to a retryable one.  A rejected candidate is never an error: it
is a verdict.
"""

from __future__ import annotations


class KernelOptError(Exception):
    """Base of every error kernelopt raises on purpose."""


class DeterministicError(KernelOptError):
    """Retrying cannot help: the input itself is wrong."""


class ProblemError(DeterministicError):
    """A problem file is missing, broken or not in a format we accept."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path = path
        self.reason = reason


class ConfigError(DeterministicError):
    """A setting is invalid or a required one is missing."""


class NoGpuError(DeterministicError):
    """GPU work was asked for on a machine without CUDA."""


class LLMReplyError(DeterministicError):
    """The model replied, but not in a form we can use (malformed JSON, no code block)."""


class InfrastructureError(KernelOptError):
    """Something outside the input failed (server unreachable, child crashed): retry."""
