"""structlog everywhere: console lines for humans, JSON with ``--log-json``.

Temporal's ``workflow.logger`` and ``activity.logger`` are stdlib adapters that
add workflow/activity ids to each record; routing the stdlib root logger
through structlog's ProcessorFormatter puts those ids (and our campaign /
kernel / candidate ids, bound via contextvars) on every line.
"""

from __future__ import annotations

import logging
import sys
from typing import Any

import structlog

_configured = False


def configure(json: bool = False, level: str = "info", stream: Any = None) -> None:
    """Configure structlog and the stdlib root logger once per process."""
    global _configured
    stream = stream or sys.stderr
    shared: list[Any] = [
        structlog.contextvars.merge_contextvars,
        structlog.stdlib.add_log_level,
        structlog.stdlib.add_logger_name,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
        _lift_temporal_extra,
    ]
    renderer: Any = (
        structlog.processors.JSONRenderer()
        if json
        else structlog.dev.ConsoleRenderer(
            colors=stream.isatty(),
            # frames' locals may hold secrets (API keys): never print them
            exception_formatter=structlog.dev.RichTracebackFormatter(
                show_locals=False, color_system="truecolor" if stream.isatty() else None
            ),
        )
    )
    structlog.configure(
        processors=[*shared, structlog.stdlib.ProcessorFormatter.wrap_for_formatter],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.stdlib.BoundLogger,
        cache_logger_on_first_use=True,
    )
    formatter = structlog.stdlib.ProcessorFormatter(
        foreign_pre_chain=shared,
        processors=[
            structlog.stdlib.ProcessorFormatter.remove_processors_meta,
            structlog.processors.format_exc_info if json else _identity,
            renderer,
        ],
    )
    handler = logging.StreamHandler(stream)
    handler.setFormatter(formatter)
    root = logging.getLogger()
    root.handlers = [handler]
    root.setLevel(level.upper())
    for noisy in ("httpx", "httpcore", "openai", "asyncio"):
        logging.getLogger(noisy).setLevel(max(logging.WARNING, root.level))
    _configured = True


def _identity(_: Any, __: str, event: dict[str, Any]) -> dict[str, Any]:
    return event


def _lift_temporal_extra(_: Any, __: str, event: dict[str, Any]) -> dict[str, Any]:
    """Temporal's adapters attach ``temporal_workflow`` / ``temporal_activity`` dicts."""
    record = event.get("_record")
    if record is None:
        return event
    for key in ("temporal_workflow", "temporal_activity"):
        info = getattr(record, key, None)
        if isinstance(info, dict):
            for field in ("workflow_id", "workflow_type", "activity_type", "attempt", "run_id"):
                if field in info and field not in event:
                    event[field] = info[field]
            event.update(ids_from_workflow_id(str(info.get("workflow_id", ""))))
    extra = getattr(record, "kernelopt", None)
    if isinstance(extra, dict):
        for key, value in extra.items():
            event.setdefault(key, value)
    return event


def ids_from_workflow_id(workflow_id: str) -> dict[str, str]:
    """Campaign workflows are named by campaign id, searches ``<campaign>/search/<target>``."""
    if not workflow_id:
        return {}
    campaign, _, target = workflow_id.partition("/search/")
    ids = {"campaign_id": campaign}
    if target:
        ids["target_id"] = target
    return ids


def get_logger(name: str | None = None, **bound: Any) -> structlog.stdlib.BoundLogger:
    if not _configured:
        configure()
    logger = structlog.get_logger(name)
    return logger.bind(**bound) if bound else logger
