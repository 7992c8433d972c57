"""Replaying recorded workflow histories as the worker would run them."""

from __future__ import annotations

from collections.abc import Sequence

from temporalio.client import WorkflowHistory
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.worker import (
    Interceptor,
    Replayer,
    WorkflowInboundInterceptor,
    WorkflowInterceptorClassInput,
    WorkflowOutboundInterceptor,
)

import worker


def replayer(workflows: Sequence[type], interceptors: Sequence[Interceptor] = ()) -> Replayer:
    """A replayer with the worker's data converter and workflow runner."""
    return Replayer(
        workflows=list(workflows),
        data_converter=pydantic_data_converter,
        workflow_runner=worker.workflow_runner(),
        interceptors=list(interceptors),
    )


async def replayed_markers(history: WorkflowHistory) -> list[bytes]:
    """Replay ``history`` on the worker's workflows (raises on non-determinism); its markers."""
    await replayer(worker.workflows()).replay_workflow(history)
    return [
        e.marker_recorded_event_attributes.SerializeToString()
        for e in history.events
        if e.HasField("marker_recorded_event_attributes")
    ]


def outbound_interceptor(outbound: type[WorkflowOutboundInterceptor]) -> Interceptor:
    """An interceptor that routes each workflow's outbound calls (activities, children) through
    ``outbound``, to see what a replayed workflow schedules."""

    class Inbound(WorkflowInboundInterceptor):
        def init(self, next_outbound: WorkflowOutboundInterceptor) -> None:
            super().init(outbound(next_outbound))

    class Intercept(Interceptor):
        def workflow_interceptor_class(
            self, input: WorkflowInterceptorClassInput
        ) -> type[WorkflowInboundInterceptor]:
            return Inbound

    return Intercept()
