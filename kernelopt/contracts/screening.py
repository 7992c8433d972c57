"""The search's cheap first tier: screening estimates, which are never results.

A screening estimate ranks a round's candidates so that only the ones that
could change the beam or the outcome pay for the four-gate cascade.  It is
measured in one process the candidates share, with few calls and no checks
beyond one smoke comparison, so a candidate can influence it: it is a model of
its own (no gate, no status, ``untrusted`` fixed to True) that no field typed
as a verdict accepts, and reports, verdicts, speedups and best-so-far never read it.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from .base import ArtifactRef, DeviceTimed, Frozen
from .compiled import SearchStepInput

# The deciding step of a candidate the screening kept out of the cascade.
SCREENED_OUT = "screening"


class ScreenParams(Frozen):
    """How the search screens a round (``SearchParams.screen``).

    ``margin`` is the screening noise the policy allows for: an estimate within
    it of the beam's worst member still goes to the cascade.  ``cap`` bounds the
    cascades per round of built-in variants; at least one candidate per round is
    always gated.  On by default: a search with no screening activity to call
    (or one that fails) gates every candidate, as before.
    """

    enabled: bool = True
    margin: float = Field(0.15, ge=0.0)
    cap: int = Field(4, ge=1)
    warmup_ms: float = Field(5.0, gt=0.0)  # do_bench's warm-up budget on CUDA
    rep_ms: float = Field(20.0, gt=0.0)  # do_bench's measuring budget on CUDA
    cpu_calls: int = Field(2, ge=1)  # timed calls per side on the CPU (Triton interpreter)
    timeout_s: float = Field(120.0, gt=0.0)  # one screening child, all candidates of a round


class ScreenCandidate(Frozen):
    candidate_id: str
    source: ArtifactRef


class ScreenInput(SearchStepInput):
    """One round's candidates of one target, screened in one child."""

    candidates: list[ScreenCandidate]
    device: str = "cuda"
    seed: int = 0  # the one input the smoke check and the timings use
    # "wrapper": Inductor's baseline wrapper, which gate_candidate's timings also use;
    # "eager": the problem's Model (no compiled wrapper at hand, as in CPU tests).
    baseline: Literal["wrapper", "eager"] = "wrapper"
    params: ScreenParams = ScreenParams()


class ScreeningEstimate(Frozen):
    """An untrusted, in-process estimate of one candidate: ranking data, never a result.

    It shares no required field with ``GateVerdict``, so neither validates as the other.
    """

    candidate_id: str
    untrusted: Literal[True] = True
    smoke_ok: bool = False  # its output matched the baseline's on the one input
    smoke_note: str = ""  # why not (or "")
    estimated_ms: float | None = None
    baseline_ms: float | None = None
    estimated_speedup: float | None = None  # baseline_ms / estimated_ms, same process
    seconds: float = 0.0  # wall time spent screening this candidate
    # set by the search: what the policy made of it
    selected: bool = False
    why: str = ""


class ScreenResult(DeviceTimed):
    estimates: list[ScreeningEstimate]
    child_starts: int = 0  # screening children started (one, plus one after each crash)
    # candidates measured again in a fresh child because one screened before them, in the
    # same process, crashed, raised or tampered (``gates.screening``)
    rescreened: list[str] = Field(default_factory=list)
