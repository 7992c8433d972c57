"""Reference child: eager outputs (fp32, TF32 off) and float64 outputs of the problem.

Writes each input set to ``inputs_dir`` (the candidate may read those) and the
outputs to ``refs_dir`` (only the parent reads those, and deletes them before
any candidate runs).  Records whether the reference itself mutates its inputs,
so that candidate mutation is judged against what the reference does.
"""

from __future__ import annotations

import copy
from typing import Any

import torch

from gates.checked_calls import shares_memory
from gates.child import mark
from gates.jobs.build import weights_path
from gates.problem_io import (
    ProblemFile,
    dtype_of,
    flatten_output,
    load_values,
    nbytes,
    same_values,
    save_values,
    set_path,
    shape_of,
    to_device,
    to_double,
)
from gates.protocol import InputSet, ReferenceJob, ReferenceResult, SetInfo
from kernelopt.precision import strict_fp32

JOB_TYPE = ReferenceJob


def _make_inputs(problem: ProblemFile, s: InputSet) -> list[Any]:
    if s.kind == "holdout":
        lists = problem.holdout_inputs(s.seed)
        return lists[s.holdout_index]
    if s.kind == "derived":
        return derived_holdout(problem, s.seed)
    return problem.inputs(s.seed)


def _batch_size(values: list[Any]) -> int | None:
    first = next((v for v in values if isinstance(v, torch.Tensor) and v.dim() >= 1), None)
    return int(first.shape[0]) if first is not None else None


def derived_holdout(problem: ProblemFile, seed: int) -> list[Any]:
    """``get_inputs()`` at another leading batch size, for a file that defines no held-out shape.

    Every tensor whose first dimension is the first tensor's batch size gets one
    row fewer (two draws joined when the batch is 1): a kernel that hard-codes
    the batch size, or a grid computed for it, is wrong there.
    """
    values = problem.inputs(seed)
    batch = _batch_size(values)
    if batch is None:
        raise ValueError("no tensor input with a batch dimension")
    if batch >= 2:
        return [
            v[: batch - 1].clone()
            if isinstance(v, torch.Tensor) and v.dim() >= 1 and v.shape[0] == batch
            else v
            for v in values
        ]
    more = problem.inputs(seed + 1)
    return [
        torch.cat([v, w])
        if isinstance(v, torch.Tensor) and v.dim() >= 1 and v.shape[0] == batch
        else v
        for v, w in zip(values, more, strict=True)
    ]


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def run(job: ReferenceJob) -> ReferenceResult:
    strict_fp32()
    mark("import_problem")
    problem = ProblemFile(job.problem_path)
    holdout_available = len(problem.holdout_inputs(0)) if problem.get_holdout_inputs else 0
    mark("build_model")
    model = problem.build(problem.Model, job.model_seed, job.device)
    torch.save(
        {k: v.detach().cpu() for k, v in model.state_dict().items()}, weights_path(job.inputs_dir)
    )
    param_bytes = sum(t.numel() * t.element_size() for t in model.state_dict().values())
    input_sets = list(job.input_sets)
    holdout_note = ""
    if job.holdout_seed is not None:
        for k in range(min(holdout_available, job.max_holdout_sets)):
            input_sets.append(
                InputSet(name=f"holdout{k}", seed=job.holdout_seed, kind="holdout", holdout_index=k)
            )
        if not holdout_available and problem.kernel is None:
            input_sets.append(
                InputSet(name="holdout_derived", seed=job.holdout_seed, kind="derived")
            )
    infos: list[SetInfo] = []
    flops: int | None = None
    with torch.no_grad():
        for s in list(input_sets):
            mark("reference", set=s.name)
            try:
                inputs = _make_inputs(problem, s)
                save_values(set_path(job.inputs_dir, s.name), inputs)
                dev_inputs = to_device(inputs, job.device)
                if job.count_flops and flops is None and s.kind != "derived":
                    flops = _count_flops(model, dev_inputs)
                    dev_inputs = to_device(
                        load_values(set_path(job.inputs_dir, s.name)), job.device
                    )
                out = flatten_output(model(*dev_inputs))
                _sync(job.device)
            except Exception as exc:
                if s.kind != "derived":
                    raise
                # the model takes no other batch size: the verdict says the check was skipped
                why = f"{type(exc).__name__}: {exc}".splitlines()[0][:200]
                holdout_note = f"held-out shapes skipped: no other batch size runs ({why})"
                set_path(job.inputs_dir, s.name).unlink(missing_ok=True)
                input_sets.remove(s)
                continue
            aliased = [
                i
                for i, leaf in enumerate(out)
                if isinstance(leaf, torch.Tensor) and shares_memory(leaf, dev_inputs)
            ]
            save_values(set_path(job.refs_dir, s.name), out)
            originals = load_values(set_path(job.inputs_dir, s.name))  # `inputs` may alias
            mutated = [
                i
                for i, (a, b) in enumerate(zip(dev_inputs, originals, strict=True))
                if not same_values(a, b)
            ]
            if mutated:  # the candidate must then mutate the same way
                save_values(set_path(job.inputs_dir, f"{s.name}.post"), dev_inputs)
            infos.append(
                SetInfo(
                    name=s.name,
                    input_shapes=[shape_of(v) for v in inputs],
                    output_shapes=[shape_of(v) for v in out],
                    output_dtypes=[dtype_of(v) for v in out],
                    output_bytes=nbytes(out),
                    input_bytes=nbytes(inputs),
                    mutates_inputs=mutated,
                    aliased_outputs=aliased,
                    derived_holdout=s.kind == "derived",
                )
            )
        fp64_error = ""
        if job.compute_fp64:
            mark("reference_fp64")
            try:
                model64 = copy.deepcopy(model).double()
                for s in input_sets:
                    inputs = to_double(load_values(set_path(job.inputs_dir, s.name)))
                    out64 = flatten_output(model64(*to_device(inputs, job.device)))
                    save_values(set_path(job.refs_dir, f"{s.name}.fp64"), out64)
                _sync(job.device)
            except Exception as exc:  # a model that cannot run in float64: no rho rule
                fp64_error = f"{type(exc).__name__}: {exc}"[:500]
    import triton

    return ReferenceResult(
        sets=infos,
        input_sets=input_sets,
        holdout_available=holdout_available,
        holdout_note=holdout_note,
        param_bytes=param_bytes,
        flops=flops,
        state_keys=list(model.state_dict()),
        fp64_available=job.compute_fp64 and not fp64_error,
        fp64_error=fp64_error,
        device_name=torch.cuda.get_device_name() if job.device.startswith("cuda") else "cpu",
        torch_version=torch.__version__,
        triton_version=triton.__version__,
    )


def _count_flops(model: torch.nn.Module, inputs: list[Any]) -> int | None:
    """Matmul/conv FLOPs of one reference call (evidence for the roofline, never a bound)."""
    try:
        from torch.utils.flop_counter import FlopCounterMode

        with FlopCounterMode(display=False) as counter:
            model(*inputs)
        return int(counter.get_total_flops())
    except Exception:  # diagnostics never fail a run
        return None
