"""The Inductor-regeneration family: the forward compiled again by Inductor under other choices.

Honest by construction -- every kernel is Inductor's own output for the problem's
graph -- and general: the choices are Inductor's own config options
(``torch/_inductor/config.py``), each moved away from what the baseline's compile
mode uses, never picked per problem.

A candidate is the problem file plus ``ModelNew(Model)`` (the whole-forward form the
rewrite family uses) that carries Inductor's generated wrappers as text: the
static-shape one for the shapes it was compiled for, and a dynamic-shape one for
every other shape the gates feed it (holdouts), as ``torch.compile`` itself
specialises and falls back.  It does not call ``torch.compile`` at run time: Dynamo
skips every frame while a non-infra dispatch mode is active, and gate 2 checks calls
under one (``gates/poison.py``), so a compiling candidate would be checked as eager
code and timed as compiled code.

Each regeneration is a full Inductor compile, so the family runs where the built-in
proposer runs, on the device the baseline was compiled for when this process sees
it, keeps only diffs whose generated code differs from the baseline's (a hash of the
wrapper text without comments), remembers that verdict per (graph, diff) on disk,
offers a bounded number per round and starts no compile after its time budget.
"""

from __future__ import annotations

import ast
import hashlib
import json
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kernelopt.contracts.compiled import CompileResult, TargetKind
from kernelopt.contracts.problem import ProblemKind
from kernelopt.contracts.search import BuiltinProposeInput, BuiltinVariant
from kernelopt.errors import DeterministicError
from kernelopt.log import get_logger
from kernelopt.store import ArtifactStore

log = get_logger(__name__)

REGEN = "regen"
HEADER = "# kernelopt regen: "
_MISSING = object()
_ERROR = "error"
# Inductor's config is process-global and Dynamo's caches too: one regeneration at a time
_LOCK = threading.Lock()


class RegenError(DeterministicError):
    """Inductor produced no code for the forward under the given options."""


@dataclass(frozen=True)
class Choice:
    """One Inductor option and the values to try instead of the baseline's.

    ``values`` empty means the boolean flip.  ``backends`` says whose code the option
    shapes ("triton" on GPUs, "cpp" on the CPU), so a CPU run does not spend
    compiles on options its backend never reads.
    """

    option: str
    backends: tuple[str, ...] = ("triton",)
    values: tuple[Any, ...] = ()

    def alternatives(self, current: Any) -> list[Any]:
        if not self.values:
            return [not current] if isinstance(current, bool) else []
        return [v for v in self.values if v != current]


BOTH = ("triton", "cpp")
# reduction strategy and tiling first (where Inductor's heuristics choose most), then fusion
CHOICES: tuple[Choice, ...] = (
    Choice("triton.persistent_reductions"),
    Choice("split_reductions", BOTH),
    Choice("triton.cooperative_reductions"),
    Choice("triton.multi_kernel", values=(1,)),
    Choice("coordinate_descent_tuning"),
    Choice("triton.max_tiles", values=(3,)),
    Choice("triton.prefer_nd_tiling"),
    Choice("triton.tile_reductions"),
    Choice("aggressive_fusion", BOTH),
    Choice("epilogue_fusion", BOTH),
    Choice("max_autotune_pointwise"),
    Choice("cpp.max_horizontal_fusion_size", ("cpp",), values=(1,)),
    Choice("cpp.enable_loop_tail_vec", ("cpp",)),
)


def config_value(option: str) -> Any:
    """The installed torch's value of a dotted Inductor option, or ``_MISSING``."""
    from torch._inductor import config

    value: Any = config
    for part in option.split("."):
        value = getattr(value, part, _MISSING)
        if value is _MISSING:
            return _MISSING
    return value


def single_diffs(
    backend: str, base: dict[str, Any], choices: Sequence[Choice] = CHOICES
) -> list[dict[str, Any]]:
    """One-option diffs from ``base`` (the compile mode's patches) for options that exist here.

    Options the installed torch does not have are skipped, so one list serves
    every torch version the product runs on.
    """
    out = []
    for choice in choices:
        if backend not in choice.backends:
            continue
        default = config_value(choice.option)
        if default is _MISSING:
            continue
        current = base.get(choice.option, default)
        out.extend({choice.option: value} for value in choice.alternatives(current))
    return out


def label_of(diff: dict[str, Any]) -> str:
    """``regen:persistent_reductions=False`` (sorted, ``triton.`` dropped: it is the default)."""
    parts = sorted(f"{k.removeprefix('triton.')}={v}" for k, v in diff.items())
    return f"{REGEN}:" + ",".join(parts)


def read_header(source: str) -> dict[str, Any] | None:
    """The diff a regeneration candidate was made with (None: not one of ours)."""
    first = source.split("\n", 1)[0]
    if not first.startswith(HEADER):
        return None
    try:
        value = json.loads(first[len(HEADER) :])
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def normalised(sources: Sequence[str]) -> str:
    """Generated code without comment lines (Inductor numbers its graphs in them)."""
    text = "\n".join(sources)
    return "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("#"))


def digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


@dataclass(frozen=True)
class Regenerated:
    """One Inductor compile of the forward: its wrapper and how to call it from ``forward``.

    ``args`` are Dynamo's sources of the graph's inputs (``L['self']._parameters['w']``,
    ``L['x']``, ``L['x'].size()[0]``): Python expressions over ``forward``'s locals, so
    the candidate hands the wrapper its own parameters and inputs, as Dynamo does.
    """

    wrapper: str
    args: list[str]
    signature: list[Any]
    output: str  # "tensor", "tuple" or "list": how forward returns the wrapper's outputs
    names: list[str]  # forward's input names, the keys of ``L`` besides ``self``
    training: bool  # the module mode it was compiled in (batch-norm, dropout differ)

    @property
    def code(self) -> str:
        return normalised([self.wrapper])


def _source_name(node: Any) -> str:
    grapharg = node.meta.get("grapharg")
    source = getattr(grapharg, "source", None)
    if source is None:
        raise RegenError(f"graph input {node.name} has no source in the module")
    name = source.name  # a property in newer torch, a method in older
    return name if isinstance(name, str) else name()


def input_signature(values: Sequence[Any]) -> list[Any]:
    """What the static wrapper was compiled for: each tensor's shape, stride and dtype."""
    import torch

    return [
        [list(v.shape), list(v.stride()), str(v.dtype), v.device.type]
        if isinstance(v, torch.Tensor)
        else None
        for v in values
    ]


def regenerate(
    source: str, seed: int, device: str, options: dict[str, Any], dynamic: bool = False
) -> Regenerated:
    """Inductor's wrapper for the problem's forward under ``options``.

    Compiled as the baseline is (one graph, no grad, the gates' numerics) on the
    problem's seeded model and inputs, then loaded and called once through the same
    argument expressions the candidate uses, so a candidate that cannot call its own
    wrapper is never offered.
    """
    import torch
    from torch._inductor.compile_fx import compile_fx
    from torch._inductor.utils import run_and_get_code

    from kernelopt.compile.runtime import load_wrapper_module, run_call
    from kernelopt.precision import strict_fp32
    from kernelopt.problem import load_module_problem

    problem = load_module_problem(source)
    names: list[str] = []

    def backend(gm: Any, example_inputs: list[Any]) -> Any:
        names[:] = [_source_name(n) for n in gm.graph.find_nodes(op="placeholder")]
        return compile_fx(gm, example_inputs, config_patches=dict(options))

    with _LOCK:
        strict_fp32()  # the numerics the gates run: autotuning must choose for them
        torch._dynamo.reset()
        try:
            model = problem.make_model(seed, device)
            inputs = problem.make_inputs(seed, device)
            compiled = torch.compile(model, backend=backend, fullgraph=True, dynamic=dynamic)
            with torch.no_grad():
                out, sources = run_and_get_code(compiled, *inputs)
        finally:
            torch._dynamo.reset()
        if not sources:
            raise RegenError("Inductor produced no code for the forward")
        if isinstance(out, torch.Tensor):
            output, leaves = "tensor", 1
        elif isinstance(out, (tuple, list)) and all(isinstance(o, torch.Tensor) for o in out):
            output, leaves = type(out).__name__, len(out)
        else:
            raise RegenError(f"the forward returns {type(out).__name__}, not tensors")
        module = load_wrapper_module(sources[-1], "regen")
        inputs_named = forward_names(model)
        scope = {"L": {"self": model, **dict(zip(inputs_named, inputs, strict=False))}}
        with torch.no_grad():
            got = run_call(module, [eval(name, {}, scope) for name in names])
    if len(got) != leaves:
        raise RegenError(f"the wrapper returns {len(got)} outputs, the forward {leaves}")
    return Regenerated(
        sources[-1], names, input_signature(inputs), output, inputs_named, model.training
    )


def forward_names(model: Any) -> list[str]:
    """``forward``'s positional parameter names (Dynamo's ``L[...]`` keys for the inputs)."""
    import inspect

    params = list(inspect.signature(model.forward).parameters.values())
    if any(p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD, p.KEYWORD_ONLY) for p in params):
        raise RegenError("forward takes *args, **kwargs or keyword-only inputs")
    return [p.name for p in params]


def generated_code(source: str, seed: int, device: str, options: dict[str, Any]) -> str:
    """The static-shape code a diff produces (normalised), for comparing diffs.

    Building the candidate compiles the same graph again; Inductor's FX-graph cache
    serves that second compile, so only the dynamic-shape one costs a full compile.
    """
    return regenerate(source, seed, device, options).code


CANDIDATE = """\
{header}
{problem}


import torch as _ko_torch  # noqa: E402

from kernelopt.compile.runtime import load_wrapper_module as _ko_load  # noqa: E402

# Inductor's own code for Model.forward under these options (kernelopt.proposer.regen):
# the static-shape wrapper for the shapes it was compiled for, the dynamic-shape one for
# any other, as torch.compile itself specialises and falls back.
_KO_INDUCTOR_OPTIONS = {options}
_KO_SIGNATURE = {signature}
_KO_STATIC_ARGS = {static_args}
_KO_DYNAMIC_ARGS = {dynamic_args}
_KO_STATIC_WRAPPER = {static_wrapper}
_KO_DYNAMIC_WRAPPER = {dynamic_wrapper}
_KO_OUTPUT = {output!r}
_KO_NAMES = {names}
_KO_TRAINING = {training}


def _ko_signature(values):
    return [
        [list(v.shape), list(v.stride()), str(v.dtype), v.device.type]
        if isinstance(v, _ko_torch.Tensor)
        else None
        for v in values
    ]


class ModelNew(Model):
    \"\"\"Model with the forward Inductor generates under {label}.\"\"\"

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._ko_runs = {{}}

    def _ko_run(self, static):
        if static not in self._ko_runs:
            text, names = (
                (_KO_STATIC_WRAPPER, _KO_STATIC_ARGS)
                if static
                else (_KO_DYNAMIC_WRAPPER, _KO_DYNAMIC_ARGS)
            )
            codes = [compile(n, "<graph input>", "eval") for n in names]
            self._ko_runs[static] = (_ko_load(text, "regen").call, codes)
        return self._ko_runs[static]

    def forward(self, *inputs):
        if self.training != _KO_TRAINING:
            raise RuntimeError(f"compiled for training={{_KO_TRAINING}}, called in the other mode")
        call, codes = self._ko_run(_ko_signature(inputs) == _KO_SIGNATURE)
        scope = {{"L": {{"self": self, **dict(zip(_KO_NAMES, inputs))}}}}
        out = call([eval(code, {{}}, scope) for code in codes])
        if _KO_OUTPUT == "tensor":
            return out[0]
        return tuple(out) if _KO_OUTPUT == "tuple" else list(out)
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
        names=repr(static.names),
        training=repr(static.training),
        label=label_of(diff),
    )


def regenerated_candidate(
    source: str, seed: int, device: str, options: dict[str, Any], diff: dict[str, Any]
) -> str:
    """A candidate's text: the static and the dynamic-shape regeneration under ``options``."""
    static = regenerate(source, seed, device, options)
    dynamic = regenerate(source, seed, device, options, dynamic=True)
    return candidate_source(source, options, diff, static, dynamic)


def generation_device(compiled: CompileResult) -> str | None:
    """Where to regenerate: the baseline's device when this process sees it (None: it does not)."""
    import torch

    if compiled.gpu_name in ("", "cpu"):
        return "cpu"
    return "cuda" if torch.cuda.is_available() else None


def graph_key(compiled: CompileResult, source: str, device: str) -> str:
    """What fixes the captured graph and its code: problem, seed, mode, versions, device."""
    import torch

    payload = {
        "baseline": compiled.cache_key,
        "source": digest(source),
        "seed": compiled.problem.seed,
        "mode": compiled.mode,
        "device": device,
        "torch": torch.__version__,
    }
    return digest(json.dumps(payload, sort_keys=True))


class DigestCache:
    """Code digests of earlier regenerations of one graph, by diff label, on disk.

    A later round (or campaign) on the same graph then knows which diffs change
    nothing without compiling them again.
    """

    def __init__(self, directory: Path, key: str) -> None:
        self.path = directory / f"{key}.json"
        try:
            loaded = json.loads(self.path.read_text())
        except (OSError, ValueError):
            loaded = {}
        self.entries: dict[str, str] = loaded if isinstance(loaded, dict) else {}

    def get(self, label: str) -> str | None:
        return self.entries.get(label)

    def put(self, label: str, value: str) -> None:
        self.entries[label] = value
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(f".tmp{threading.get_ident()}")
        tmp.write_text(json.dumps(self.entries, indent=1, sort_keys=True))
        tmp.replace(self.path)


def default_cache_dir() -> Path:
    from kernelopt.config import Settings

    return Settings.from_env().home / "regen_cache"


Generate = Callable[[str, int, str, dict[str, Any]], str]
Build = Callable[[str, int, str, dict[str, Any], dict[str, Any]], str]


class RegenFamily:
    """Strategy: one more Inductor option moved per candidate, from the search state's own.

    A root state is the baseline, so the first rounds try single options; once a
    regeneration is accepted its diff is the state and the next rounds add one
    option to it (coordinate descent over Inductor's choices).
    """

    name = REGEN

    def __init__(
        self,
        per_round: int = 2,
        budget_s: float = 240.0,
        cache_dir: Path | None = None,
        generate: Generate = generated_code,
        build: Build = regenerated_candidate,
        choices: Sequence[Choice] = CHOICES,
    ) -> None:
        self.per_round = per_round
        self.budget_s = budget_s
        self.cache_dir = cache_dir
        self.generate = generate
        self.build = build
        self.choices = tuple(choices)

    def propose(
        self, inp: BuiltinProposeInput, store: ArtifactStore, count: int, exclude: set[str]
    ) -> tuple[list[BuiltinVariant], str]:
        """Up to ``min(count, per_round)`` regenerations whose code differs from the state's."""
        count = min(count, self.per_round)
        if count <= 0:
            return [], ""
        if inp.target.kind != TargetKind.FORWARD:
            return [], "Inductor regeneration applies to whole-forward targets only"
        if inp.compiled.problem.kind != ProblemKind.MODULE:
            return [], "Inductor regeneration applies to module problems only"
        device = generation_device(inp.compiled)
        if device is None:
            return [], "the baseline was compiled for a GPU this process cannot see"
        from kernelopt.compile.capture import mode_options

        source = store.get_text(inp.compiled.problem.source)
        state = read_header(store.get_text(inp.state_source)) or {}
        base = {**mode_options(inp.compiled.mode), **state}
        backend = "cpp" if device == "cpu" else "triton"
        diffs = [
            {**state, **one}
            for one in single_diffs(backend, base, self.choices)
            if not set(one) & set(state)
        ]
        cache = DigestCache(
            self.cache_dir or default_cache_dir(), graph_key(inp.compiled, source, device)
        )
        started = time.monotonic()
        code = self._digest_of(cache, source, inp, device, base, state)
        if code is None:
            return [], "Inductor could not compile the forward here"
        # code an earlier round already offered (under another diff) is not offered again
        tried = {cache.get(label) for label in exclude} - {None, _ERROR}
        seen, out, same, note = {code, *tried}, [], 0, ""
        for diff in diffs:
            label = label_of(diff)
            if label in exclude:
                continue
            if len(out) >= count:
                break
            if cache.get(label) is None and time.monotonic() - started > self.budget_s:
                note = f"regeneration time budget ({self.budget_s:.0f} s) spent"
                break
            found = self._digest_of(cache, source, inp, device, {**base, **diff}, diff)
            if found is None:
                continue
            if found in seen:  # the same code as the state's or an earlier candidate's
                same += 1
                continue
            seen.add(found)
            try:
                text = self.build(source, inp.compiled.problem.seed, device, {**base, **diff}, diff)
            except Exception as exc:  # as in _digest_of: a diff that cannot be built is skipped
                log.info("regeneration not buildable", label=label, error=str(exc)[:300])
                cache.put(label, _ERROR)
                continue
            ref = store.put_text(text, "text/x-python", f"{label.replace(':', '_')}.py")
            out.append(
                BuiltinVariant(
                    label=label,
                    source=ref,
                    config=dict(diff),
                    description=f"Inductor's own code for the forward under {label[len(REGEN) + 1 :]}",
                )
            )
        if not out and not note:
            note = f"no Inductor option left that changes the code ({same} gave the same code)"
        return out, note

    def _digest_of(
        self,
        cache: DigestCache,
        source: str,
        inp: BuiltinProposeInput,
        device: str,
        options: dict[str, Any],
        diff: dict[str, Any],
    ) -> str | None:
        label = label_of(diff)
        known = cache.get(label)
        if known is not None:
            return None if known == _ERROR else known
        started = time.monotonic()
        try:
            found = digest(self.generate(source, inp.compiled.problem.seed, device, options))
        except Exception as exc:  # Inductor and the user's module ran here: a failure is a note
            log.info("regeneration failed", label=label, error=f"{type(exc).__name__}: {exc}"[:300])
            cache.put(label, _ERROR)
            return None
        log.info("regenerated", label=label, seconds=round(time.monotonic() - started, 1))
        cache.put(label, found)
        return found


FAMILY = RegenFamily()


def propose_regen(
    inp: BuiltinProposeInput, store: ArtifactStore, count: int, exclude: set[str]
) -> tuple[list[BuiltinVariant], str]:
    """The built-in proposer's entry: the default regeneration strategy."""
    return FAMILY.propose(inp, store, count, exclude)
