"""Which screened candidates earn the four-gate cascade (the search's second tier).

Pure: the search hands it the beam's full-cascade speedups and a round's
untrusted screening estimates, and gets back every estimate marked selected or
not, with the reason.  A candidate goes to the cascade only when it could
change what the search does next: enter a full beam (beat its worst member), or
in the last round, where no beam follows, beat the best so far.  Screening is
noisy and untrusted, so "could" means within ``margin`` of the bar; a candidate
that inflates its estimate only buys itself a cascade that judges it properly.
At least one candidate per round is gated, so a round is never decided by
screening alone, and at most ``cap`` are.

An LLM round (``select_for_cascade(..., llm_round=True)``) keeps each candidate's fix loop: a
candidate that fails the smoke check, or has no estimate, is gated so that the
cascade's full feedback reaches its retry-fix; only one correct on the smoke
input and below the bar is kept out.  No cap applies there: every such
candidate cost an LLM call, and one that could change the beam is worth its
cascade.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from kernelopt.contracts.screening import ScreeningEstimate, ScreenParams


@dataclass(frozen=True)
class Bar:
    """What a candidate's estimate must reach (within the margin) to be gated."""

    speedup: float | None  # None: the beam has room, any working candidate could enter
    what: str


def bar_for(member_speedups: Sequence[float | None], width: int, last_round: bool) -> Bar:
    """The bar from the beam's members' full-cascade speedups (the root counts as 1.0)."""
    known = sorted(s for s in member_speedups if s is not None)
    if last_round:
        best = max([1.0, *known])
        return Bar(best, f"the best so far ({best:.3f}x)")
    if len(known) < width:
        return Bar(None, f"the beam has room ({len(known)} of {width})")
    worst = known[-width]  # the weakest of the ``width`` fastest
    return Bar(worst, f"the beam's worst member ({worst:.3f}x)")


def _rank_key(e: ScreeningEstimate) -> tuple[int, float, str]:
    usable = e.smoke_ok and e.estimated_speedup is not None
    return (0 if usable else 1, -(e.estimated_speedup or 0.0), e.candidate_id)


def select_for_cascade(
    estimates: Sequence[ScreeningEstimate],
    member_speedups: Sequence[float | None],
    width: int,
    params: ScreenParams,
    last_round: bool = False,
    *,
    llm_round: bool = False,
) -> list[ScreeningEstimate]:
    """Every estimate, best first, with ``selected`` and ``why`` set.

    In an LLM round a candidate without a working estimate is gated for its fix loop and
    no cap applies (module docstring).
    """
    bar = bar_for(member_speedups, width, last_round)
    if llm_round:
        return _never_none(_marked(estimates, lambda e: _judge_for_its_fix(e, bar, params.margin)))
    judged = _marked(estimates, lambda e: _judge(e, bar, params.margin))
    return _never_none(_capped(judged, params.cap))


def _marked(
    estimates: Sequence[ScreeningEstimate],
    judge: Callable[[ScreeningEstimate], tuple[bool, str]],
) -> list[ScreeningEstimate]:
    """Every estimate, best first, with ``judge``'s verdict: one ranking for both policies."""
    out: list[ScreeningEstimate] = []
    for e in sorted(estimates, key=_rank_key):
        selected, why = judge(e)
        out.append(e.model_copy(update={"selected": selected, "why": why}))
    return out


def _capped(judged: list[ScreeningEstimate], cap: int) -> list[ScreeningEstimate]:
    """``judged`` with the selections past the first ``cap`` undone: a round's cascades are
    bounded."""
    chosen = 0
    for i, e in enumerate(judged):
        if e.selected and chosen >= cap:
            why = f"over the round's cap of {cap} cascades ({e.why})"
            judged[i] = e.model_copy(update={"selected": False, "why": why})
        chosen += judged[i].selected
    return judged


def _never_none(out: list[ScreeningEstimate]) -> list[ScreeningEstimate]:
    """``out`` with its first estimate selected where none is: a round is never decided by
    screening alone."""
    if out and not any(e.selected for e in out):
        first = out[0]
        out[0] = first.model_copy(
            update={"selected": True, "why": f"the round's best estimate ({first.why})"}
        )
    return out


def _judge(e: ScreeningEstimate, bar: Bar, margin: float) -> tuple[bool, str]:
    if not e.smoke_ok:
        return False, f"smoke check failed: {e.smoke_note or 'no output'}"[:300]
    est = e.estimated_speedup
    if est is None:
        return False, "no estimate"
    if bar.speedup is None:
        return True, f"estimate {est:.3f}x; {bar.what}"
    if est * (1.0 + margin) >= bar.speedup:
        return True, f"estimate {est:.3f}x could beat {bar.what} within {margin:.0%}"
    return False, f"estimate {est:.3f}x below {bar.what} by more than {margin:.0%}"


def _judge_for_its_fix(e: ScreeningEstimate, bar: Bar, margin: float) -> tuple[bool, str]:
    """``_judge``, but a candidate without a working estimate is gated: the cascade's full
    feedback reaches its retry-fix."""
    if not e.smoke_ok or e.estimated_speedup is None:
        failed = e.smoke_note or "no estimate"
        return True, f"smoke check failed ({failed}): gated for its feedback"[:300]
    return _judge(e, bar, margin)


__all__ = ["Bar", "bar_for", "select_for_cascade"]
