"""The reference side of a verification, prepared once per problem and reused.

``prepare_reference`` runs the reference child (eager fp32 with TF32 off, plus
float64), loads its outputs into this process's memory and deletes them from
disk: from then on no file a candidate process could find holds a reference
answer.  Input sets: the configured seeds, one held-out seed drawn at random
here (a candidate cannot have precomputed answers for it), the problem's
held-out shapes, and a ``newvals`` set whose values are copied into the
previous call's buffers (same pointers, same shapes, new values).  The sealed
sets are timing's first-sight sets: moved out of the inputs as soon as the
reference child is done, into ``sealed/`` beside them, where no candidate
process looks, and handed to a timing child only when it asks
(``gates.first_sight``).

A bundle may judge more than one candidate (``max_uses``; the campaign path's
``gates.reference_cache`` keeps one per problem in a GPU worker): then each
candidate is judged on a draw of the unpredictable sets no earlier candidate saw,
so answers one candidate passes to the next are worth nothing; their values stay
out of every feedback text all the same.  ``prepare_reference`` makes the first
draw, ``prepare_draw`` each later one when its use begins (most bundles are used
once, so draws made ahead would mostly be wasted).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import re
import secrets
import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from gates.cache_guard import CacheGuard
from gates.first_sight import FIRST_SIGHT_CALLS
from gates.gpu_lease import gpu_section
from gates.jobs.build import weights_path
from gates.model_gate import model_verdict_from_sets, sampled_rule
from gates.numerics import output_scale
from gates.problem_io import (
    digest_dir,
    dtype_of,
    in_float64,
    inputs_post,
    load_values,
    set_path,
    state_after,
    tied,
)
from gates.protocol import (
    DrawOnly,
    EvaluationPolicy,
    InputSet,
    OutputLeaf,
    ReferenceJob,
    ReferenceResult,
    SideEffects,
    group_name,
)
from gates.reference_facts import ReferenceFacts
from gates.runner import ChildOutcome, run_job
from gates.sampled_float64 import SampledRule
from gates.timed_checks import TimedCheck, check_timed_calls
from kernelopt.contracts.verdicts import GateSettings


@dataclass
class ReferenceBundle:
    problem_path: str
    settings: GateSettings
    workdir: Path
    inputs_dir: Path
    outcome: ChildOutcome
    result: ReferenceResult | None = None
    refs: dict[str, list[Any]] = field(default_factory=dict)
    refs64: dict[str, list[Any]] | None = None
    # the module state each reference call left (a stateful forward's), by set
    states: dict[str, list[Any]] = field(default_factory=dict)
    # the float64 run's inputs after the call (where it changes some) and state, by set
    post64: dict[str, list[Any]] = field(default_factory=dict)
    states64: dict[str, list[Any]] = field(default_factory=dict)
    # near-ties of the index outputs in the float64 run, by set (``gates.index_ties``)
    ties64: dict[str, list[Any]] = field(default_factory=dict)
    input_digests: dict[str, str] = field(default_factory=dict)
    pristine_dir: Path | None = None
    corrupted: bool = False  # inputs and their pristine copy both changed: unusable
    tamper_seen: bool = False  # some candidate rewrote a shared file: never share it further
    guarded: dict[str, bytes] = field(default_factory=dict)  # small files, kept in memory
    caches: CacheGuard = field(default_factory=CacheGuard)  # armed around candidate processes
    # the reference outputs' own numbers (magnitudes, finiteness, fp32-vs-float64 error),
    # computed by the first comparison that needs them and reused by every later one; kept
    # per tensor object and version, so refs replaced or changed are described afresh
    facts: ReferenceFacts = field(default_factory=ReferenceFacts, compare=False)
    use: int = 1  # which of the candidates this bundle may judge the current one is
    max_uses: int = 1  # more than one: kept for later candidates of the same problem
    draw: int = 0  # the draw of unpredictable sets this candidate is judged on
    draws: int = 1  # how many draws the bundle may make: one per use, each when it begins
    draw_outcome: ChildOutcome | None = None  # the reference child that made this use's draw
    shared_id: str = ""  # a shared bundle's id (its first use's inputs and seeds), in each use
    # gate 4's first paired round found the baseline dispatch-bound (None: not timed yet)
    baseline_dispatch_bound: bool | None = None

    @property
    def bundle_id(self) -> str:
        """What judged a verdict, for its audit: a digest of the inputs and their seeds."""
        if self.shared_id:
            return self.shared_id
        seeds = {s.name: s.seed for s in self.input_sets}
        text = json.dumps({"inputs": self.input_digests, "seeds": seeds}, sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    @property
    def heldout_digest(self) -> str:
        """The unpredictable sets this candidate is judged on: their files and seeds."""
        held = {
            s.name: [s.seed, self.input_digests.get(set_path("", s.name).name, "")]
            for s in self.input_sets
            if s.group >= 0
        }
        return hashlib.sha256(json.dumps(held, sort_keys=True).encode()).hexdigest()[:16]

    def audit(self) -> dict[str, Any]:
        """The bundle's part of a verdict's metrics: which reference, which use of how many,
        and which draw of held-out sets judged it (``of``: the most draws the bundle may
        make, one per use; a draw is made when its use begins)."""
        return {
            "id": self.bundle_id,
            "use": self.use,
            "uses": self.max_uses,
            "heldout": {"draw": self.draw, "of": self.draws, "digest": self.heldout_digest},
        }

    def reveals(self, name: str) -> bool:
        """May feedback show reference values of set ``name``?

        Always for the configured seeds (the same in every verdict); for the
        held-out and new-values sets only while no later candidate is judged on
        them, or an agent could copy the expected values into its next candidate.
        """
        return self.max_uses <= 1 or name in {f"seed{s}" for s in self.settings.seeds}

    def before_candidate(self) -> None:
        """Open the compiler-cache watch window of the candidate process about to start."""
        self.caches.arm()

    def guard(self, *paths: str | Path) -> None:
        """Also watch these files (the problem copy, wrapper descriptions) for rewrites."""
        for path in paths:
            if path and Path(path).is_file():
                self.guarded[str(path)] = Path(path).read_bytes()

    def tampered_inputs(self) -> list[str]:
        """Files changed since the reference wrote them (restored before returning).

        Every child reads the same input files and the same problem copy, and a
        candidate process can write to them: changed inputs would feed the next
        candidate or the baseline's timing run something else (a problem file
        with a sleep in it makes any candidate look fast).  Compiler-cache
        files changed since ``before_candidate()`` count too (deleted, so they
        regenerate).  The caller rejects the candidate that ran last.
        """
        rewritten = self._rewritten()
        self.tamper_seen = self.tamper_seen or bool(rewritten)
        return rewritten

    def _rewritten(self) -> list[str]:
        """``tampered_inputs``' list, without noting it on the bundle."""
        rewritten = [self.caches.describe(path) for path in self.caches.check()]
        for path, content in self.guarded.items():
            current = Path(path).read_bytes() if Path(path).is_file() else None
            if current != content:
                Path(path).write_bytes(content)
                rewritten.append(Path(path).name)
        if not self.input_digests:
            return rewritten
        now = digest_dir(self.inputs_dir)
        changed = sorted(
            name
            for name in set(now) | set(self.input_digests)
            if now.get(name) != self.input_digests.get(name)
        )
        if not changed:
            return rewritten
        if self.pristine_dir is None or digest_dir(self.pristine_dir) != self.input_digests:
            self.corrupted = True  # nothing trustworthy to restore from
            return rewritten + changed
        for name in changed:
            (self.inputs_dir / name).unlink(missing_ok=True)
            if (self.pristine_dir / name).is_file():
                shutil.copy2(self.pristine_dir / name, self.inputs_dir / name)
        return rewritten + changed

    @property
    def ok(self) -> bool:
        return self.result is not None

    @property
    def input_sets(self) -> list[InputSet]:
        """The sets a candidate is judged on (gates 1-3, the timing rotation): not the sealed."""
        return [s for s in self.result.input_sets if s.kind != "sealed"] if self.result else []

    @property
    def sealed_sets(self) -> list[str]:
        """The sealed sets, in the order the rounds take them (two a round)."""
        return [s.name for s in self.result.input_sets if s.kind == "sealed"] if self.result else []

    @property
    def sealed_dir(self) -> Path:
        return sealed_dir(self.workdir)

    @property
    def seeds_used(self) -> dict[str, int]:
        return {s.name: s.seed for s in self.input_sets}

    def atol_for(self, name: str) -> float:
        """Gate 2's absolute tolerance on set ``name``: the settings' own, grown on the widened
        set as far as the reference's outputs grew there (rounding error grows with them, so
        an honest kernel's error on elements that cancel would outgrow a fixed one)."""
        atol = self.settings.atol
        kind = next((s.kind for s in self.input_sets if s.name == name), "")
        if kind != "widened":
            return atol
        seeded = [s.name for s in self.input_sets if s.kind == "seed" and s.name in self.refs]
        base = max((output_scale(self.refs[n], self.facts) for n in seeded), default=0.0)
        grown = output_scale(self.refs.get(name, []), self.facts)
        return atol * max(1.0, grown / base) if base > 0 else atol

    def set_info(self, name: str) -> Any:
        if self.result is None:
            return None
        return next((s for s in self.result.sets if s.name == name), None)

    def rotation_sets(self) -> list[str]:
        """The sets a timing child's inputs rotate through: the first set's shapes, no others."""
        if self.result is None or not self.result.sets:
            return []
        first = self.result.sets[0]
        # sealed: timing's first sight; widened: values no timed call should be slowed by
        kept_out = {s.name for s in self.result.input_sets if s.kind in ("sealed", "widened")}
        return [
            s.name
            for s in self.result.sets
            if s.input_shapes == first.input_shapes and s.name not in kept_out
        ]

    def first_sight_sets(self) -> list[str]:
        """Of the rotation's sets, the drawn ones (held-out seed, new values), kept out of
        it: the baseline's first-sight sets (the candidate's are sealed), so the rotation
        keeps the configured seeds (two at least, so every call still changes values)."""
        rotating = self.rotation_sets()
        drawn = [s.name for s in self.input_sets if s.group >= 0 and s.name in rotating]
        return drawn if len(rotating) - len(drawn) >= 2 else []

    def timing_rotation(self) -> list[str]:
        """The sets a timing child's calls rotate over: the rotation's, first-sight ones out."""
        once = set(self.first_sight_sets())
        return [n for n in self.rotation_sets() if n not in once]

    def expected_outputs(self, name: str = "") -> list[OutputLeaf]:
        """What a call on set ``name`` must return (default: the first set, as timed)."""
        if self.result is None or not self.result.sets:
            return []
        info = self.set_info(name) if name else self.result.sets[0]
        devices = info.output_devices or [None] * len(info.output_shapes)
        rotated = [self.set_info(n) for n in self.rotation_sets()] if not name else []
        varying = {
            i
            for other in rotated
            if other is not None
            for i, shape in enumerate(other.output_shapes)
            if i < len(info.output_shapes) and shape != info.output_shapes[i]
        }
        return [
            OutputLeaf(
                shape=shape,
                dtype=dtype,
                may_alias=i in info.aliased_outputs,
                holds_state=i in info.state_outputs,
                device=dev or "",
                varying=i in varying,
            )
            for i, (shape, dtype, dev) in enumerate(
                zip(info.output_shapes, info.output_dtypes, devices, strict=True)
            )
        ]

    def side_effects(self) -> SideEffects:
        """What the reference's calls change besides their outputs, which timed calls record."""
        if self.result is None:
            return SideEffects()
        inputs = sorted({k for info in self.result.sets for k in info.mutates_inputs})
        return SideEffects(inputs=inputs, state=list(self.policy.stateful) if self.states else [])

    def timed_outputs(self) -> list[OutputLeaf]:
        """What a timed call records: its outputs (``expected_outputs``), then the values of
        its side effects after it, each as the reference left them on the first set."""
        expected = self.expected_outputs()
        effects = self.side_effects()
        if not effects or not self.input_sets:
            return expected
        values = self._effects_after(self.input_sets[0].name, effects)
        return expected + [
            OutputLeaf(
                shape=list(v.shape) if isinstance(v, torch.Tensor) else None,
                dtype=dtype_of(v),
                may_alias=i < len(effects.inputs),
                holds_state=i >= len(effects.inputs),
            )
            for i, v in enumerate(values)
        ]

    def inputs_as_left(self, name: str) -> list[Any]:
        """Set ``name``'s inputs as the reference's call left them: from the pristine copy
        (the sealed sets' folder for a first-sight set), the set itself where the call
        changed none."""
        dirs = [self.pristine_dir or self.inputs_dir, self.sealed_dir]
        files = [set_path(str(d), f) for f in (inputs_post(name), name) for d in dirs]
        return load_values(next(p for p in files if p.is_file()))

    def _effects_after(self, name: str, effects: SideEffects) -> list[Any]:
        """The reference's values of ``effects`` after its call on set ``name``."""
        inputs = self.inputs_as_left(name) if effects.inputs else []
        return [inputs[k] for k in effects.inputs] + list(self.states.get(name, []))

    def _effects64(self, name: str, effects: SideEffects) -> list[Any]:
        """The float64 run's values of ``effects`` after its call (None where it kept none)."""
        post64 = self.post64.get(name)
        state64 = self.states64.get(name) or [None] * len(effects.state)
        return [post64[k] if post64 else None for k in effects.inputs] + list(state64)

    def check_timed(self, path: Path, first_sight: list[str] | None = None) -> TimedCheck:
        """Compare every call a timing child recorded with the reference (gate 2's rules):
        the rotation's, then the first-sight calls on ``first_sight`` (the side's own); their
        side effects' values after each call too (``timed_outputs``)."""
        s = self.settings
        names = self.timing_rotation() + list(first_sight or [])
        refs, refs64 = self.refs, self.refs64
        effects = self.side_effects()
        leaf_names = None
        if effects:
            outputs = len(self.expected_outputs())
            leaf_names = [f"output {j}" for j in range(outputs)]
            leaf_names += [f"input {k} as the call left it" for k in effects.inputs]
            leaf_names += [f"state {n} as the call left it" for n in effects.state]
            refs = {n: [*self.refs[n], *self._effects_after(n, effects)] for n in names}
            if self.refs64 is not None:
                refs64 = {n: [*self.refs64[n], *self._effects64(n, effects)] for n in names}
        return check_timed_calls(
            path,
            names,
            refs,
            rtol=s.rtol,
            atol=s.atol,
            scale_tol=s.scale_tol,
            facts=self.facts,
            reveals=self.reveals,
            in_full=self._model_problem if s.run_model_gate else None,
            sampled=self._sampled_rule,
            refs64=refs64,
            ties64=self.ties64,
            leaf_names=leaf_names,
        )

    def _sampled_rule(self, name: str) -> SampledRule | None:
        """Gate 3's rule for every timed call's samples on set ``name`` (None: not judged)."""
        if not self.settings.run_model_gate or self.refs64 is None or name not in self.refs64:
            return None
        return sampled_rule(self.refs[name], self.refs64[name], self.settings, self.facts)

    def _model_problem(self, name: str, leaves: list[Any]) -> str:
        """Gate 3's float64 rule on one whole timed output ("" when it holds or cannot run)."""
        if self.refs64 is None or name not in self.refs64:
            return ""
        s = self.settings
        outputs = leaves[: len(self.refs[name])]  # the side effects' values follow them
        verdict = model_verdict_from_sets(
            [(name, outputs, self.refs[name], self.refs64[name])],
            tolerance=s.model_tolerance,
            rho_max=s.rho_max,
            settings=s,
            facts=self.facts,
        )
        return "" if verdict.passed else f"against the float64 reference, {verdict.reason}"

    @property
    def policy(self) -> EvaluationPolicy:
        """How every child evaluates the model (mode, seeding, state): stated in every outcome."""
        return self.result.policy if self.result else EvaluationPolicy()

    @property
    def gpu_seconds(self) -> float:
        return self.outcome.wall_s if self.settings.device.startswith("cuda") else 0.0


def _fresh_seeds(count: int, taken: set[int]) -> list[int]:
    """``count`` random seeds, distinct from each other and from ``taken``."""
    seeds: list[int] = []
    while len(seeds) < count:
        seed = secrets.randbelow(2**31 - 1)
        if seed not in taken and seed not in seeds:
            seeds.append(seed)
    return seeds


def plan_input_sets(settings: GateSettings) -> tuple[list[InputSet], list[int]]:
    """The seeded sets plus the first draw of the unpredictable ones, in the order the
    candidate sees them, and the held-out shapes' seed (none when they are off)."""
    sets = [InputSet(name=f"seed{s}", seed=s) for s in settings.seeds]
    drawn, holdout_seeds = plan_draw(settings, 0, set())
    return sets + drawn, holdout_seeds


def plan_draw(
    settings: GateSettings, group: int, taken: set[int]
) -> tuple[list[InputSet], list[int]]:
    """Draw ``group`` of the unpredictable sets (held-out seed, new values) and its held-out
    shapes' seed, every seed fresh: distinct from the configured ones and from ``taken``.

    The new-values set reuses the buffers of the draw's held-out set, else of the last
    seeded set: every candidate job holds both (the reference child only draws values).
    """
    sealed = FIRST_SIGHT_CALLS * settings.first_sight_rounds if settings.run_perf else 0
    fresh = iter(_fresh_seeds(4 + 2 * sealed, set(settings.seeds) | taken))
    last_seeded = f"seed{settings.seeds[-1]}" if settings.seeds else ""
    drawn: list[InputSet] = []
    if settings.heldout_seed:
        drawn.append(InputSet(name=group_name("heldout", group), seed=next(fresh), group=group))
    if last_seeded or drawn:
        drawn.append(
            InputSet(
                name=group_name("newvals", group),
                seed=next(fresh),
                kind="newvals",
                reuse_buffers_of=drawn[-1].name if drawn else last_seeded,
                group=group,
            )
        )
    if settings.widened_values:
        drawn.append(
            InputSet(
                name=group_name("widened", group), seed=next(fresh), kind="widened", group=group
            )
        )
    drawn += [
        InputSet(
            name=group_name(f"sealed{i}", group),
            seed=next(fresh),
            kind="sealed",
            group=group,
            call_seed=next(fresh),  # not the CRC of name and seed the policy file would show
        )
        for i in range(sealed)
    ]
    holdout_seed = next(fresh)
    return drawn, [holdout_seed] if settings.holdout_shapes else []


def sealed_dir(workdir: Path) -> Path:
    """Where a bundle in ``workdir`` keeps its sealed sets' inputs (no sandbox sees it)."""
    return Path(workdir) / "sealed"


def seal(inputs_dir: Path, into: Path, names: list[str]) -> None:
    """Move the files of sets ``names`` (inputs and any post-call state) out of
    ``inputs_dir``, the directory candidate processes read, into ``into``."""
    into.mkdir(parents=True, exist_ok=True)
    for name in names:
        for path in (set_path(str(inputs_dir), name), set_path(str(inputs_dir), inputs_post(name))):
            if path.is_file():
                path.replace(into / path.name)  # a rename: one file system


def _reference_job(
    problem_path: str | Path,
    settings: GateSettings,
    workdir: Path,
    planned: tuple[list[InputSet], list[int]],
    draw_only: DrawOnly | None = None,
) -> ReferenceJob:
    """The reference child's job: ``planned`` sets into ``workdir``'s inputs and refs (a
    draw's into empty ``draw.inputs`` and ``draw.refs``, the kept weights read-only)."""
    sets, holdout_seeds = planned
    prefix = "draw." if draw_only is not None else ""
    return ReferenceJob(
        problem_path=str(Path(problem_path).resolve()),
        device=settings.device,
        model_seed=settings.model_seed,
        input_sets=sets,
        inputs_dir=str(workdir / f"{prefix}inputs"),
        refs_dir=str(workdir / f"{prefix}refs"),
        weights_file=str(weights_path(str(workdir / "inputs"))) if draw_only is not None else "",
        holdout_seeds=holdout_seeds,
        # gate 2's float64 excuse needs it too, so a run without gate 3 (a re-timing) has it
        compute_fp64=True,
        tie_rtol=settings.rtol,
        tie_atol=settings.atol,
        count_flops=settings.run_perf and draw_only is None,  # evidence for the roofline only
        model_mode=settings.model_mode,
        cpu_budget_s=settings.cpu_budget_s if settings.device == "cpu" else 0.0,
        draw_only=draw_only,
    )


@contextlib.contextmanager
def checked_if_cut(tampered_inputs: Callable[[], list[str]] | None) -> Iterator[None]:
    """Run the bundle's check (``ReferenceBundle.tampered_inputs``) when the block is cut
    short by an exception: the candidate process's cache-guard window still closes, and
    whatever it rewrote is dropped before anything else loads it."""
    try:
        yield
    except BaseException:
        if tampered_inputs is not None:
            tampered_inputs()
        raise


def prepare_reference(
    problem_path: str | Path,
    settings: GateSettings,
    workdir: Path,
    *,
    keep_refs: bool = False,
) -> ReferenceBundle:
    """Run the reference child and keep its outputs in memory only.

    ``keep_refs``: leave the output files in ``workdir/refs`` too, for a caller
    that keeps the bundle where no candidate process can see it (``gates.reference_cache``,
    which adds later draws with ``prepare_draw``).
    """
    workdir = Path(workdir)
    inputs_dir = workdir / "inputs"
    refs_dir = workdir / "refs"
    inputs_dir.mkdir(parents=True, exist_ok=True)
    refs_dir.mkdir(parents=True, exist_ok=True)
    job = _reference_job(problem_path, settings, workdir, plan_input_sets(settings))
    with gpu_section("shared", settings.device):
        outcome = run_job(
            job, workdir / "reference", timeout_s=settings.static_timeout_s, device=settings.device
        )
    bundle = ReferenceBundle(str(problem_path), settings, workdir, inputs_dir, outcome)
    if not outcome.ok or outcome.result is None:
        shutil.rmtree(refs_dir, ignore_errors=True)
        return bundle
    result = ReferenceResult.model_validate(outcome.result)
    bundle.result = result
    # Not kept: mapped (privately) instead of copied -- GBs on large problems -- and the
    # files unlinked at once, before any candidate process starts.  The child that wrote
    # them has exited, so no process holds or can open them again: the mapped values can
    # no longer change.  Kept files stay on disk for later candidates, so those are copied.
    mapped = not keep_refs
    load_references(bundle, refs_dir, result, mmap=mapped)
    if not keep_refs:
        shutil.rmtree(refs_dir, ignore_errors=True)
    seal(inputs_dir, bundle.sealed_dir, bundle.sealed_sets)
    bundle.input_digests = digest_dir(inputs_dir)
    bundle.guard(problem_path)
    bundle.pristine_dir = workdir / "inputs.pristine"
    shutil.copytree(inputs_dir, bundle.pristine_dir, dirs_exist_ok=True)
    return bundle


def load_references(
    bundle: ReferenceBundle, refs_dir: Path, result: ReferenceResult, *, mmap: bool
) -> None:
    """The reference child's answers into ``bundle``: outputs, the state each call left (a
    stateful forward's), and the float64 run's outputs, inputs after the call and state."""

    def each(name_of: Callable[[str], str]) -> dict[str, list[Any]]:
        paths = {s.name: set_path(str(refs_dir), name_of(s.name)) for s in result.input_sets}
        return {
            name: load_values(path, mmap=mmap) for name, path in paths.items() if path.is_file()
        }

    bundle.refs = {
        s.name: load_values(set_path(str(refs_dir), s.name), mmap=mmap) for s in result.input_sets
    }
    bundle.states = each(state_after) if result.policy.stateful else {}
    if result.fp64_available:
        bundle.refs64 = {
            s.name: load_values(set_path(str(refs_dir), in_float64(s.name)), mmap=mmap)
            for s in result.input_sets
        }
        bundle.post64 = each(lambda name: in_float64(inputs_post(name)))
        bundle.states64 = each(lambda name: in_float64(state_after(name)))
        bundle.ties64 = each(lambda name: in_float64(tied(name)))


def prepare_draw(
    kept: ReferenceResult,
    problem_path: str | Path,
    settings: GateSettings,
    workdir: Path,
    draw: int,
    taken: set[int],
) -> tuple[ChildOutcome, ReferenceResult | None]:
    """Run the reference child for draw ``draw`` alone, adding its sets to the bundle that
    ``kept`` describes in ``workdir`` (its ``inputs`` and ``refs``; the seeded sets and the
    weights stay as they are).  ``taken``: seeds no new set may have.  The result is the
    draw's only (None when the child failed); ``draw_disagrees`` says whether it fits.

    The child writes into empty directories whose files are then moved into the kept
    ones: a sandboxed child's writable directories are copied into its view and back,
    which for the kept ones was the whole bundle (GBs) on every draw.
    """
    workdir = Path(workdir)
    taken = taken | {s.seed for s in kept.input_sets}
    draw_only = DrawOnly(draw=draw, cpu_rows=kept.cpu_rows, inputs_note=kept.policy.inputs_note)
    planned = plan_draw(settings, draw, taken)
    job = _reference_job(problem_path, settings, workdir, planned, draw_only)
    news = [(Path(job.inputs_dir), workdir / "inputs"), (Path(job.refs_dir), workdir / "refs")]
    for new, _ in news:
        shutil.rmtree(new, ignore_errors=True)
        new.mkdir()
    run_dir = workdir / "reference.draw"
    shutil.rmtree(run_dir, ignore_errors=True)
    outcome = run_job(job, run_dir, timeout_s=settings.static_timeout_s, device=settings.device)
    if not outcome.ok or outcome.result is None:
        return outcome, None
    drawn = ReferenceResult.model_validate(outcome.result)
    seal(news[0][0], sealed_dir(workdir), [s.name for s in drawn.input_sets if s.kind == "sealed"])
    for new, kept_dir in news:
        for path in sorted(new.glob("*.pt")):
            path.replace(kept_dir / path.name)  # a rename: one file system
        shutil.rmtree(new, ignore_errors=True)
    return outcome, drawn


def _draw_kinds(result: ReferenceResult) -> list[str]:
    """The kinds of unpredictable sets a result holds, draw suffixes left out."""
    return sorted(re.sub(r"_h\d+$", "", s.name) for s in result.input_sets if s.group >= 0)


def draw_disagrees(kept: ReferenceResult, drawn: ReferenceResult) -> str:
    """Why a new draw cannot join ``kept`` ("" when it can): the child decided the evaluation
    policy again and must agree on all of it but the call seeds, so no candidate is judged
    under a mixed policy; and the draw must hold the same kinds of sets, float64 included."""
    mine, theirs = kept.policy.model_dump(), drawn.policy.model_dump()
    changed = sorted(k for k in mine if k != "call_seeds" and mine[k] != theirs[k])
    if changed:
        return "policy: " + ", ".join(f"{k} {theirs[k]!r} instead of {mine[k]!r}" for k in changed)
    if _draw_kinds(kept) != _draw_kinds(drawn):
        return f"sets {_draw_kinds(drawn)} instead of {_draw_kinds(kept)}"
    if kept.fp64_available != drawn.fp64_available:
        return f"float64 outputs {'missing' if kept.fp64_available else 'present'}"
    if kept.widened_note != drawn.widened_note:
        return f"widened note {drawn.widened_note!r} instead of {kept.widened_note!r}"
    if kept.holdout_note != drawn.holdout_note:
        return f"held-out note {drawn.holdout_note!r} instead of {kept.holdout_note!r}"
    return ""


def with_draw(kept: ReferenceResult, drawn: ReferenceResult) -> ReferenceResult:
    """``kept``'s seeded sets and the new draw (earlier draws dropped), one policy for all."""
    seeded = {s.name for s in kept.input_sets if s.group < 0}
    call_seeds = {k: v for k, v in kept.policy.call_seeds.items() if k in seeded}
    call_seeds.update(drawn.policy.call_seeds)
    return kept.model_copy(
        update={
            "input_sets": [s for s in kept.input_sets if s.name in seeded] + drawn.input_sets,
            "sets": [s for s in kept.sets if s.name in seeded] + drawn.sets,
            "policy": kept.policy.model_copy(update={"call_seeds": call_seeds}),
        }
    )
