"""Test workers with GPU heartbeat timeouts of a few seconds.

Fault tests want a killed GPU worker noticed in ~3 s.  The product refuses
``gpu_heartbeat_s`` below 10 s because its supervised GPU children heartbeat
every 5 s; the GPU doubles heartbeat every few milliseconds, so test workers
may go lower.  The patch replaces the GPU call sites' options in
``workflows.activity_options`` in this process and passes that module through
the workflow sandbox, so the workflows this worker runs see it (timeouts are
not workflow commands: recorded histories replay the same).
"""

from __future__ import annotations

import dataclasses
from datetime import timedelta

from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner

GPU_CALL_SITES = ("COMPILE", "TRIAGE", "PROFILE", "GATE_CANDIDATE", "RESTITCH", "GATE_MODEL")


def shorten_gpu_heartbeats(seconds: float) -> None:
    from workflows import activity_options as opts

    for name in GPU_CALL_SITES:
        current = getattr(opts, name)
        setattr(opts, name, dataclasses.replace(current, heartbeat=timedelta(seconds=seconds)))


def sandbox_seeing_the_patch(base: SandboxedWorkflowRunner) -> SandboxedWorkflowRunner:
    """``base`` (the production sandbox) with ``workflows.activity_options`` passed through."""
    return SandboxedWorkflowRunner(
        restrictions=base.restrictions.with_passthrough_modules("workflows.activity_options")
    )
