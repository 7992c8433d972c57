"""A regeneration as a whole-forward candidate: the problem file plus a ``ModelNew`` that
runs Inductor's wrappers (why not ``torch.compile`` at run time: the package docstring)."""

from __future__ import annotations

import ast
import json
from typing import Any

from kernelopt.proposer.header import header_json
from kernelopt.proposer.regen.choices import label_of
from kernelopt.proposer.regen.code import Regenerated, RegenError, regenerate

HEADER = "# kernelopt regen: "


def read_header(source: str) -> dict[str, Any] | None:
    """The diff a regeneration candidate was made with (None: not one of ours)."""
    value = header_json(source, HEADER)
    return value if isinstance(value, dict) else None


CANDIDATE = """\
{header}
{problem}


import torch as _ko_torch  # noqa: E402

from kernelopt.proposer.regen.forward import ForwardPlan as _KoPlan  # noqa: E402
from kernelopt.proposer.regen.forward import ShapeCheck as _KoShapes  # noqa: E402
from kernelopt.proposer.regen.forward import dataclass_builder as _ko_dataclass  # noqa: E402
from kernelopt.proposer.regen.forward import forward_scope as _ko_scope  # noqa: E402

# Inductor's own code for Model.forward under these options (kernelopt.proposer.regen):
# the static-shape wrapper for the shapes it was compiled for, the dynamic-shape one (not
# autotuned: no shape it serves is timed) for any other, as torch.compile itself
# specialises and falls back.
_KO_INDUCTOR_OPTIONS = {options}
_KO_SIGNATURE = {signature}
_KO_STATIC_ARGS = {static_args}
_KO_DYNAMIC_ARGS = {dynamic_args}
_KO_STATIC_WRAPPER = {static_wrapper}
_KO_DYNAMIC_WRAPPER = {dynamic_wrapper}
_KO_OUTPUT = {output!r}
_KO_RESULT_TYPE = {result_type}  # builds the named tuple or dataclass the forward returns (None: a plain one)
# per wrapper: where each result comes from, the outputs stored on the module, and the
# constants the forward returns as they are
_KO_STATIC_LAYOUT = {static_layout}
_KO_DYNAMIC_LAYOUT = {dynamic_layout}
# per wrapper: the arguments that are Python numbers the graph takes as 0-d tensors
_KO_STATIC_WRAPS = {static_wraps}
_KO_DYNAMIC_WRAPS = {dynamic_wraps}
_KO_NAMES = {names}
_KO_TRAINING = {training}
_KO_STATIC_SHAPES = _KoShapes(_KO_SIGNATURE)


class ModelNew(Model):
    \"\"\"Model with the forward Inductor generates under {label}.\"\"\"

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._ko_plans = {{}}

    def _ko_plan(self, static):
        plan = self._ko_plans.get(static)
        if plan is None:
            plan = self._ko_plans[static] = (
                _KoPlan(_KO_STATIC_WRAPPER, _KO_STATIC_ARGS, _KO_STATIC_LAYOUT, _KO_STATIC_WRAPS, _KO_OUTPUT)
                if static
                else _KoPlan(_KO_DYNAMIC_WRAPPER, _KO_DYNAMIC_ARGS, _KO_DYNAMIC_LAYOUT, _KO_DYNAMIC_WRAPS, _KO_OUTPUT)
            )
        return plan

    def forward(self, *inputs):
        if self.training != _KO_TRAINING:
            raise RuntimeError(f"compiled for training={{_KO_TRAINING}}, called in the other mode")
        plan = self._ko_plan(_KO_STATIC_SHAPES(inputs))
        args, out = plan.run(_ko_scope(self, _KO_NAMES, inputs))
        for index, name in plan.state.items():  # as Dynamo sets what the forward stored
            owner, _, leaf = name.rpartition(".")
            module = self.get_submodule(owner) if owner else self
            if isinstance(getattr(module, leaf), _ko_torch.nn.Parameter):
                with _ko_torch.no_grad():
                    getattr(module, leaf).copy_(out[index])
            else:
                setattr(module, leaf, out[index])
        result = plan.results(out, args)
        return result if _KO_RESULT_TYPE is None else _KO_RESULT_TYPE(result)
"""


def candidate_source(
    problem_source: str,
    options: dict[str, Any],
    diff: dict[str, Any],
    static: Regenerated,
    dynamic: Regenerated,
) -> str:
    """The problem file plus ``ModelNew`` running the regenerated wrappers."""
    text = repr(dict(sorted(options.items())))
    if ast.literal_eval(text) != options:  # only literals can be written into the candidate
        raise RegenError(f"options that cannot be written as source: {text[:120]}")
    return CANDIDATE.format(
        header=HEADER + json.dumps(diff, sort_keys=True),
        problem=problem_source.rstrip(),
        options=text,
        signature=repr(static.signature),
        static_args=repr(static.args),
        dynamic_args=repr(dynamic.args),
        static_wrapper=repr(static.wrapper),
        dynamic_wrapper=repr(dynamic.wrapper),
        output=static.output,
        result_type=static.result_type or "None",
        static_layout=repr((static.picks, static.state, static.constants)),
        dynamic_layout=repr((dynamic.picks, dynamic.state, dynamic.constants)),
        static_wraps=repr(static.wraps),
        dynamic_wraps=repr(dynamic.wraps),
        names=repr(static.names),
        training=repr(static.training),
        label=label_of(diff),
    )


# Inductor options that only choose among equivalent kernels by timing them
TUNING_OPTIONS = frozenset(
    {"max_autotune", "max_autotune_gemm", "max_autotune_pointwise", "coordinate_descent_tuning"}
)


def untuned(options: dict[str, Any], diff: dict[str, Any]) -> dict[str, Any]:
    """``options`` without the tuning ones the diff does not move.

    The dynamic-shape wrapper runs only the shapes the gates check, never the ones they
    time, so tuning it buys nothing; on a large model it is most of a build's compile.
    """
    return {k: v for k, v in options.items() if k not in TUNING_OPTIONS or k in diff}


def regenerated_candidate(
    source: str, seed: int, device: str, options: dict[str, Any], diff: dict[str, Any]
) -> str:
    """A candidate's text: the static and the dynamic-shape regeneration under ``options``."""
    static = regenerate(source, seed, device, options)
    dynamic = regenerate(source, seed, device, untuned(options, diff), dynamic=True)
    return candidate_source(source, options, diff, static, dynamic)
