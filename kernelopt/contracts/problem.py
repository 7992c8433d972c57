"""What the user asked us to optimise."""

from __future__ import annotations

from enum import StrEnum

from .base import ArtifactRef, Frozen


class ProblemKind(StrEnum):
    """Which kind a problem is, and what that kind can do.

    The kinds themselves are classes in ``kernelopt.kinds`` (loading, compile,
    baseline, built-in variants); the facts below are what callers that must
    not import a kind ask -- workflows (no torch, deterministic), the compile
    step, the proposer families.  A caller asks the capability, never which
    member a kind is (``tests/kernelopt/kinds/test_kind_questions.py`` holds it to that).
    """

    MODULE = "module"  # KernelBench file: Model, get_inputs, get_init_inputs
    TRITON = "triton"  # standalone Triton kernel + launcher + reference
    HELION = "helion"  # a @helion.kernel function + reference

    @property
    def own_baseline(self) -> bool:
        """The file brings its baseline (a kernel and its launcher); False: ``torch.compile(Model)``."""
        return self in _OWN_BASELINE

    @property
    def whole_forward_only(self) -> bool:
        """Segmentation makes one target, the whole forward: the file's launcher.

        Its inputs and outputs are the contract and the file's kernel the
        baseline; there are no Inductor kernels or fusion groups to search one
        by one, whatever search mode was asked for.
        """
        return self.own_baseline

    @property
    def inductor_variants(self) -> bool:
        """The built-in proposer's Inductor families apply to the problem.

        The baseline is Inductor's compile of ``Model``, so its wrapper's kernels
        can be re-tuned one at a time, its forward graph rewritten, regenerated
        under other Inductor options or given other library choices.  False: the
        kind walks its own launch space (``Kind.builtin_variants``).
        """
        return not self.own_baseline


_OWN_BASELINE = frozenset({ProblemKind.TRITON, ProblemKind.HELION})


class ProblemSpec(Frozen):
    """A problem as it travels through a campaign: its source lives in the store."""

    name: str
    kind: ProblemKind = ProblemKind.MODULE
    source: ArtifactRef
    path: str = ""  # where the user's file was, for display only
    seed: int = 0  # inputs and weights are drawn from this seed
    level: int | None = None  # KernelBench level, when known (bench suites)
