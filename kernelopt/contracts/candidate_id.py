"""Candidate ids: one type that writes them and reads them back.

An id names where a candidate came from in its search -- target, iteration, beam
state, and either a plan and retry attempt (LLM) or a variant (built-in) -- and
whether the gate call re-timed an earlier winner.  The text form is part of stored
workflow histories, so it never changes; code builds and parses ids only here.
"""

from __future__ import annotations

import re

from .base import Frozen

RETIME_SUFFIX = ":retime"
_FORM = re.compile(
    r"^(?P<target>.+):i(?P<iteration>\d+)-s(?P<state>\d+)-"
    r"(?:p(?P<plan>\d+)-a(?P<attempt>\d+)|v(?P<variant>\d+))(?P<retime>:retime)?$"
)


class CandidateId(Frozen):
    target: str
    iteration: int
    state: int  # the beam state it grew from
    plan: int | None = None  # LLM: which plan of the round ...
    attempt: int = 0  # ... and which retry-fix attempt of it
    variant: int | None = None  # built-in: which variant of the state's proposal
    retime: bool = False  # the gate call that re-timed an earlier winner

    def __str__(self) -> str:
        tail = f"v{self.variant}" if self.variant is not None else f"p{self.plan}-a{self.attempt}"
        text = f"{self.target}:i{self.iteration}-s{self.state}-{tail}"
        return text + (RETIME_SUFFIX if self.retime else "")

    @classmethod
    def parse(cls, text: str) -> CandidateId | None:
        """The id's parts, or None for an id written by hand (``verify``, tests)."""
        found = _FORM.match(text)
        if found is None:
            return None
        variant = found["variant"]
        return cls(
            target=found["target"],
            iteration=int(found["iteration"]),
            state=int(found["state"]),
            plan=None if variant is not None else int(found["plan"]),
            attempt=int(found["attempt"] or 0),
            variant=int(variant) if variant is not None else None,
            retime=found["retime"] is not None,
        )

    def retimed(self) -> CandidateId:
        return self.model_copy(update={"retime": True})
