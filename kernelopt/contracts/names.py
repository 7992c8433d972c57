"""Activity and workflow names: the wire contract between workflows and workers.

Workflows call activities by these names (never by importing the functions), so
the workflow sandbox never loads torch and a test worker can register test
implementations under the same names.
"""

from __future__ import annotations

# workflows
OPTIMIZE_MODEL = "OptimizeModel"
SEARCH_KERNEL = "SearchKernel"

# GPU activities (one per GPU, max_concurrent_activities=1)
COMPILE = "compile"
TRIAGE = "triage"
# triage's full result written to the artifact store; the campaign carries its reference
TRIAGE_TO_STORE = "triage_to_store"
PROFILE = "profile"
GATE_CANDIDATE = "gate_candidate"  # gates 1-2: static + multi-seed correctness
RESTITCH = "restitch"
GATE_MODEL = "gate_model"  # gates 3-4: V_model and V_perf on the re-stitched model
SCREEN = "screen_candidates"  # the search's untrusted first tier: rank a round cheaply

# CPU activities
SEGMENT = "segment"
# the segmentation written to the artifact store; the campaign carries its reference
SEGMENT_TO_STORE = "segment_to_store"
SCOPE_SEGMENT = "scope_segment"  # one target's part of a stored segmentation
SEGMENT_TARGETS = "segment_targets"  # the built-in proposer's per-kernel and forward targets
PLAN_TARGETS = "plan_targets"  # a by-reference campaign's search order, stored
TARGET_SCOPE = "target_scope"  # one planned target with its scoped segmentation and facts
PLAN_LOOKUP = "plan_lookup"  # planned targets by id
PLAN = "plan"
EXECUTE = "execute"
RETRY_FIX = "retry_fix"
SUMMARIZE = "summarize"
PROPOSE_BUILTIN = "propose_builtin"
# the same proposer on the GPU queue, for whole-forward targets of a CUDA campaign: Inductor
# regeneration compiles and autotunes on the GPU, which must not overlap a gate's timing
PROPOSE_BUILTIN_GPU = "propose_builtin_gpu"
WRITE_REPORT = "write_report"
EXPORT_HISTORY = "export_history"
ARCHIVE_SEARCH_LOG = "archive_search_log"  # decisions + ledger out of a search's carried state

GPU_ACTIVITIES = (
    COMPILE,
    TRIAGE,
    TRIAGE_TO_STORE,
    PROFILE,
    GATE_CANDIDATE,
    RESTITCH,
    GATE_MODEL,
    SCREEN,
    PROPOSE_BUILTIN_GPU,
)
CPU_ACTIVITIES = (
    SEGMENT,
    SEGMENT_TO_STORE,
    SCOPE_SEGMENT,
    SEGMENT_TARGETS,
    PLAN_TARGETS,
    TARGET_SCOPE,
    PLAN_LOOKUP,
    PLAN,
    EXECUTE,
    RETRY_FIX,
    SUMMARIZE,
    PROPOSE_BUILTIN,
    WRITE_REPORT,
    EXPORT_HISTORY,
    ARCHIVE_SEARCH_LOG,
)

CPU_QUEUE = "kernelopt-cpu"
GPU_QUEUE_PREFIX = "kernelopt-gpu"


def gpu_queue_for(gpu_name: str) -> str:
    """Timings compare only on the same GPU model, so the queue carries the model's name."""
    slug = "".join(c if c.isalnum() else "-" for c in gpu_name.lower()).strip("-")
    while "--" in slug:
        slug = slug.replace("--", "-")
    return f"{GPU_QUEUE_PREFIX}-{slug}" if slug else GPU_QUEUE_PREFIX
