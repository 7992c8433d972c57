"""Candidate child: import, build, dry-run (gate 1), then every checked call (gate 2).

No reference output exists in this process.  Per call: inputs are fresh
tensors loaded from the reference child's files (or, for a ``newvals`` set,
new values copied into the previous call's very buffers: pointer- and
shape-keyed caches return stale answers there); allocations are poisoned;
the whole device is synchronised before outputs are read; inputs are
compared with their on-disk originals afterwards (mutation).  Before every
call, the model's state is restored and the RNGs seeded as the reference's
policy says (``gates.call_policy``), so the dry run leaves no trace; after it,
the state the reference's forward changes is written out for the parent to
compare (a forward that skips its running-statistics update is wrong).
"""

from __future__ import annotations

import time
from typing import Any

import torch

from gates.call_policy import CallPreparer, load_policy, state_left
from gates.checked_calls import output_problem
from gates.harness_watch import HarnessWatch, listed
from gates.interpreted_launches import InterpretedLaunches
from gates.job_progress import mark
from gates.jobs.build import build_callable
from gates.poison import PoisonAllocations, poison_cached_blocks
from gates.problem_io import (
    flatten_output,
    inputs_after,
    inputs_post,
    load_values,
    output_structure,
    save_values,
    set_path,
    state_after,
    to_device,
)
from gates.protocol import CallRecord, CandidateJob, CandidateResult
from kernelopt.kinds.validate import same_values
from kernelopt.precision import strict_fp32

JOB_TYPE = CandidateJob

_perf_counter = time.perf_counter  # captured before candidate import


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()  # device-wide: side streams are included


def run(job: CandidateJob) -> CandidateResult:
    strict_fp32()
    launches = InterpretedLaunches()
    launches.install()  # the CPU: which of its Triton kernels the interpreter ran
    watch = HarnessWatch()  # before the candidate is imported: its checks are ours
    poison = PoisonAllocations() if job.poison else None
    with torch.no_grad():
        if poison is not None:
            with poison:
                fn, info = build_callable(
                    job.model, job.device, job.model_seed, job.inputs_dir, on_phase=mark
                )
        else:
            fn, info = build_callable(
                job.model, job.device, job.model_seed, job.inputs_dir, on_phase=mark
            )
        # the model's state as built and the RNG seed of the set, before every call
        policy = load_policy(job.inputs_dir)
        prepare = CallPreparer(policy, fn)
        stateful = policy.stateful
        first = job.input_sets[0]
        mark("dry_run", set=first.name)
        dry_inputs = to_device(load_values(set_path(job.inputs_dir, first.name)), job.device)
        prepare(first.name)
        t0 = _perf_counter()
        fn(*dry_inputs)
        _sync(job.device)
        dry_seconds = _perf_counter() - t0
        del dry_inputs
        mark("static_ok")
        kept: dict[str, list[Any]] = {}
        calls: list[CallRecord] = []
        for i, s in enumerate(job.input_sets):
            mark("call", set=s.name)
            fresh = load_values(set_path(job.inputs_dir, s.name))
            reused = False
            if s.reuse_buffers_of and s.reuse_buffers_of in kept:
                inputs = kept[s.reuse_buffers_of]
                reused = _copy_into(inputs, fresh)
                if not reused:
                    inputs = to_device(fresh, job.device)
            else:
                inputs = to_device(fresh, job.device)
            sizes = job.output_nbytes[i] if i < len(job.output_nbytes) else []
            poison_cached_blocks(sizes, job.device)
            prepare(s.name)
            t0 = _perf_counter()
            if poison is not None:
                with poison:
                    out = fn(*inputs)
            else:
                out = fn(*inputs)
            _sync(job.device)
            seconds = _perf_counter() - t0
            problem = (
                output_problem(out, job.expected[i], job.device, inputs)
                if i < len(job.expected)
                else ""
            )
            # a wrapper returns Inductor's flat tuple: its structure is the compiler's
            structured = job.model.kind != "wrapper" and i < len(job.expected_structures)
            want = job.expected_structures[i] if structured else ""
            if not problem and want and output_structure(out) != want:
                problem = (
                    f"the output is structured {_short(output_structure(out))}, the "
                    f"reference's {_short(want)} (containers, dict keys and their order must match)"
                )
            save_values(set_path(job.out_dir, s.name), flatten_output(out))
            del out
            if stateful:
                save_values(set_path(job.out_dir, state_after(s.name)), state_left(fn, stateful))
            # Re-read the originals from disk: on the CPU `inputs` may *be* `fresh`.
            post_path = set_path(job.inputs_dir, inputs_post(s.name))
            expected = load_values(
                post_path if post_path.is_file() else set_path(job.inputs_dir, s.name), mmap=True
            )
            # the inputs the reference changes in place are the parent's to compare (as
            # outputs, within tolerance); every other input must be left exactly as it was
            theirs = job.reference_mutates[i] if i < len(job.reference_mutates) else []
            if theirs:
                save_values(
                    set_path(job.out_dir, inputs_after(s.name)), [inputs[k] for k in theirs]
                )
            mutated = [
                k
                for k, (a, b) in enumerate(zip(inputs, expected, strict=True))
                if k not in theirs and isinstance(a, torch.Tensor) and not same_values(a, b)
            ]
            tampered = watch.tampered()
            if tampered:  # what judged this call may be the candidate's own code
                problem = (
                    "the candidate changed the checker's own code or torch's state "
                    f"({listed(tampered)})"
                )
            calls.append(
                CallRecord(
                    name=s.name,
                    seconds=seconds,
                    mutated_inputs=mutated,
                    reused_buffers=reused,
                    output_problem=problem,
                )
            )
            kept = {s.name: inputs}  # only the latest call's buffers are reused
    mark("done")
    return CandidateResult(
        weights=info.get("weights", "seed"),
        weights_note=info.get("weights_note", ""),
        dry_run_seconds=dry_seconds,
        calls=calls,
        unrun_kernels=launches.unrun(),
    )


def _short(structure: str, limit: int = 120) -> str:
    return structure if len(structure) <= limit else structure[: limit - 3] + "..."


def _copy_into(buffers: list[Any], values: list[Any]) -> bool:
    """Copy new values into existing input tensors in place; False if shapes differ."""
    if len(buffers) != len(values):
        return False
    for b, v in zip(buffers, values, strict=True):
        if isinstance(b, torch.Tensor) != isinstance(v, torch.Tensor):
            return False
        if isinstance(b, torch.Tensor) and (b.shape != v.shape or b.dtype != v.dtype):
            return False
    for b, v in zip(buffers, values, strict=True):
        if isinstance(b, torch.Tensor):
            b.copy_(v)
    return True
