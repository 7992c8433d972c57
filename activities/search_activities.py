"""Temporal activities of the kernel search: profile (GPU), the LLM roles and the built-in proposer (CPU).

Thin wrappers: the work lives in ``kernelopt.profiling``, ``kernelopt.agents``
and ``kernelopt.proposer``.  Failures are sorted here for Temporal:
``DeterministicError`` (bad key, unknown model, broken input) becomes a
non-retryable ``ApplicationError``; anything else is retried by the call
site's policy.  A malformed LLM reply is not a failure at all -- the roles
return it as a result with ``error`` set.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Iterator
from concurrent.futures import ThreadPoolExecutor

from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities.heartbeat import HeldClock, heartbeating, in_thread, reporting_loss
from activities.scope import resolve_scope
from activities.supervise import run_supervised
from gates import gpu_lease
from gates.cache_guard import CacheGuard
from kernelopt.agents import roles
from kernelopt.agents.plan_retry import planner_transport
from kernelopt.agents.transport import ChatTransport
from kernelopt.config import Settings
from kernelopt.contracts import ArtifactRef, names
from kernelopt.contracts.search import (
    BuiltinProposeInput,
    BuiltinProposeResult,
    ExecuteInput,
    ExecuteResult,
    PlanInput,
    PlanResult,
    ProfileInput,
    ProfileResult,
    ProposerConfig,
    SearchLogPage,
    SummarizeInput,
    SummarizeResult,
)
from kernelopt.errors import DeterministicError, InfrastructureError
from kernelopt.log import get_logger
from kernelopt.proposer import builtin
from kernelopt.store import open_store

log = get_logger(__name__)


@contextlib.contextmanager
def _sorted_failures() -> Iterator[None]:
    try:
        yield
    except DeterministicError as exc:
        raise ApplicationError(str(exc), type=type(exc).__name__, non_retryable=True) from exc
    except InfrastructureError as exc:
        raise ApplicationError(str(exc), type=type(exc).__name__) from exc


@contextlib.asynccontextmanager
async def _transport(config: ProposerConfig) -> AsyncIterator[ChatTransport]:
    transport = ChatTransport(config)
    try:
        yield transport
    finally:
        await transport.close()


def _home():
    return Settings.from_env().home


@activity.defn(name=names.PROFILE)
async def profile(inp: ProfileInput) -> ProfileResult:
    """GPU: ncu on one kernel state's harness (event timing when ncu cannot run).

    The state is candidate code (the beam's best), run in the sandbox with the worker's
    compiler caches writable, as in a gate child: a cache-guard window around it drops
    whatever it rewrote, which every later timing of the baseline would load.
    """
    inp = await resolve_scope(inp)
    caches = CacheGuard()
    loop = asyncio.get_running_loop()
    # one thread for both: a guard keeps its window per thread
    with ThreadPoolExecutor(max_workers=1) as guard_thread:
        await loop.run_in_executor(guard_thread, caches.arm)
        try:
            return await run_supervised(
                "kernelopt.profiling.profile:profile_target",
                inp,
                ProfileResult,
                timeout_s=2 * inp.timeout_s + 300,
                lease="exclusive",
            )
        finally:
            rewritten = await loop.run_in_executor(guard_thread, caches.check)
            if rewritten:
                log.warning(
                    "profile_rewrote_compiler_caches",
                    files=[caches.describe(path) for path in rewritten[:20]],
                )


@activity.defn(name=names.PLAN)
async def plan(inp: PlanInput) -> PlanResult:
    with _sorted_failures():
        async with heartbeating(), _transport(inp.proposer) as transport:
            store = open_store()
            asking = planner_transport(inp, store, transport)
            return await roles.plan(inp, store, asking, _home())  # type: ignore[arg-type]


@activity.defn(name=names.EXECUTE)
async def execute(inp: ExecuteInput) -> ExecuteResult:
    with _sorted_failures():
        async with heartbeating(), _transport(inp.proposer) as transport:
            return await roles.execute(inp, open_store(), transport)


@activity.defn(name=names.RETRY_FIX)
async def retry_fix(inp: ExecuteInput) -> ExecuteResult:
    with _sorted_failures():
        async with heartbeating(), _transport(inp.proposer) as transport:
            return await roles.retry_fix(inp, open_store(), transport)


@activity.defn(name=names.SUMMARIZE)
async def summarize(inp: SummarizeInput) -> SummarizeResult:
    with _sorted_failures():
        if not inp.use_llm:
            async with heartbeating():
                return await roles.summarize(inp, open_store(), None, _home())
        async with heartbeating(), _transport(inp.proposer) as transport:
            return await roles.summarize(inp, open_store(), transport, _home())


@activity.defn(name=names.PROPOSE_BUILTIN)
async def propose_builtin(inp: BuiltinProposeInput) -> BuiltinProposeResult:
    with _sorted_failures():
        return await in_thread(builtin.propose, await resolve_scope(inp), open_store())


# the built-in proposer's entry point, run in a supervised child on a GPU worker
PROPOSER = "kernelopt.proposer.builtin:propose"


@activity.defn(name=names.PROPOSE_BUILTIN_GPU)
async def propose_builtin_on_gpu(inp: BuiltinProposeInput) -> BuiltinProposeResult:
    """The built-in proposer in the GPU worker: its compiles take turns with the gates, so
    the time it holds the worker is GPU time, charged like a gate's.

    On a GPU it runs in a supervised child under the shared lease, like a compile: in a
    thread of the worker two slots' proposals took twice as long side by side, and a CUDA
    fault there would take the worker down.  Without a GPU (tests, CPU problems) it runs in
    a thread.
    """
    if gpu_lease.pinned_to_gpu():
        with _sorted_failures():
            scoped = await resolve_scope(inp)
            # its compiles autotune on the GPU and run the wrapper on held-out sets: untimed
            # work, which may share the GPU with other gates' untimed work
            return await run_supervised(PROPOSER, scoped, BuiltinProposeResult, lease="shared")
    held = HeldClock()
    with _sorted_failures(), reporting_loss(held):
        async with heartbeating(held=held):
            scoped = await resolve_scope(inp)
            result = await asyncio.to_thread(builtin.propose, scoped, open_store())
    return result.model_copy(update={"device_seconds": held()})


@activity.defn(name=names.ARCHIVE_SEARCH_LOG)
async def archive_search_log(page: SearchLogPage) -> ArtifactRef:
    """Store one page of a search's decisions and ledger; the search then forgets them."""
    name = f"{page.campaign_id}.{page.target_id}.log.json"
    return await in_thread(open_store().put_json, page, name)


CPU_ACTIVITIES = [plan, execute, retry_fix, summarize, propose_builtin, archive_search_log]
GPU_ACTIVITIES = [profile, propose_builtin_on_gpu]
