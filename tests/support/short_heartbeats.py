"""Test workers with GPU (and, when asked, CPU) heartbeat timeouts of a few seconds.

Fault tests want a killed GPU worker noticed in ~3 s.  The product refuses
``gpu_heartbeat_s`` below 10 s because its supervised GPU children heartbeat
every 5 s; the GPU doubles heartbeat every few milliseconds, so test workers
may go lower.  The patch replaces the GPU call sites' options in
``workflows.activity_options`` in this process and passes that module through
the workflow sandbox, so the workflows this worker runs see it (timeouts are
not workflow commands: recorded histories replay the same).

``shorten_cpu_heartbeats`` does the same for the CPU call sites (production:
30 s) and makes the CPU activities beat several times per timeout, so a test
that SIGKILLs the CPU worker waits seconds for the retry instead of half a
minute; the production bound itself is checked statically
(``tests/durability/test_cpu_heartbeats.py``).
"""

from __future__ import annotations

import dataclasses
from datetime import timedelta

from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner

CPU_HEARTBEAT_ENV = "KERNELOPT_TEST_CPU_HEARTBEAT_S"  # test workers read it (seconds)
BEATS_PER_TIMEOUT = 5  # CPU beats per heartbeat timeout (production: 6, every 5 s of 30)


def call_sites(gpu: bool) -> tuple[str, ...]:
    """The GPU (or CPU) call sites of ``workflows.activity_options`` that have a heartbeat timeout.

    Read from the module, not listed here: a GPU call site added later (the
    built-in proposer's ``BUILTIN_GPU``) kept its 2-minute timeout in the fault
    tests while it was missing from a hand-written list.
    """
    from workflows import activity_options as opts

    return tuple(
        name
        for name, value in vars(opts).items()
        if isinstance(value, opts.CallOptions) and value.gpu == gpu and value.heartbeat is not None
    )


def _shorten(names: tuple[str, ...], seconds: float) -> None:
    from workflows import activity_options as opts

    for name in names:
        current = getattr(opts, name)
        setattr(opts, name, dataclasses.replace(current, heartbeat=timedelta(seconds=seconds)))


def shorten_gpu_heartbeats(seconds: float) -> None:
    _shorten(call_sites(gpu=True), seconds)


def shorten_cpu_heartbeats(seconds: float) -> None:
    """CPU call sites time out after ``seconds`` without a beat; CPU bodies beat to match."""
    import activities.heartbeat

    _shorten(call_sites(gpu=False), seconds)
    activities.heartbeat.HEARTBEAT_EVERY_S = seconds / BEATS_PER_TIMEOUT


def sandbox_seeing_the_patch(base: SandboxedWorkflowRunner) -> SandboxedWorkflowRunner:
    """``base`` (the production sandbox) with ``workflows.activity_options`` passed through."""
    return SandboxedWorkflowRunner(
        restrictions=base.restrictions.with_passthrough_modules("workflows.activity_options")
    )
