"""Base classes every contract model shares.

Contracts cross process and history boundaries (Temporal payloads, artifact
JSON, CLI ``--json``).  Unknown fields are ignored so that an old worker can
still read a payload a newer workflow wrote, and new fields always carry a
default so histories recorded before they existed keep replaying.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TypeVar

from pydantic import BaseModel, ConfigDict, Field

Ref = TypeVar("Ref", bound=BaseModel)


class Contract(BaseModel):
    """A mutable contract model (workflow state, progress)."""

    model_config = ConfigDict(extra="ignore", populate_by_name=True)


class Frozen(BaseModel):
    """An immutable contract model (results, verdicts, references)."""

    model_config = ConfigDict(extra="ignore", frozen=True, populate_by_name=True)


class DeviceTimed(Frozen):
    """A GPU activity's result: how long the activity itself held its GPU worker.

    Set by the activity wrapper after the child returns (never by code the
    candidate runs in), so GPU-second budgets charge run time, not the time a
    task waited in the queue behind other campaigns.  None in histories
    recorded before the field existed: the workflow then charges wall time.
    """

    device_seconds: float | None = None


class ArtifactRef(Frozen):
    """A claim check: large things live in the artifact store, Temporal carries this."""

    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    size: int = Field(ge=0)
    media_type: str = "application/octet-stream"
    name: str = ""

    @property
    def short(self) -> str:
        return self.sha256[:12]


def reference_to(
    ref: type[Ref], whole: BaseModel, artifact: ArtifactRef, counts: Mapping[str, str]
) -> Ref:
    """``ref`` for ``whole`` once it is stored as ``artifact``.

    A by-reference model keeps its whole result's field names where they mean the
    same, so every field the two share is copied by name (a field added to both is
    never forgotten in one); each ``counts`` field holds the length of the list of
    ``whole`` that it names.
    """
    shared = [n for n in ref.model_fields if n in type(whole).model_fields and n not in counts]
    fields = {n: getattr(whole, n) for n in shared}
    fields |= {n: len(getattr(whole, listed)) for n, listed in counts.items()}
    return ref(artifact=artifact, **fields)
