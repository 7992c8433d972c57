"""The evaluation's own record, in the artifact store so that it travels in every ``home.tgz``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from kernelopt.config import Settings
from kernelopt.errors import KernelOptError
from kernelopt.store import write_atomic

MANIFEST = ("refs", "llm-eval", "eval.json")  # under the artifact store: travels with the state


class EvalProblem(BaseModel):
    path: str
    name: str
    level: int | None = None
    campaign_id: str = ""
    error: str = ""  # why it was not submitted


class EvalCall(BaseModel):
    command: str
    host: str
    started_at: str
    seconds: float = 0.0
    replies_delivered: int = 0
    replies_skipped: int = 0
    stopped: str = ""
    states: dict[str, str] = Field(default_factory=dict)  # campaign id -> state at the end


class EvalManifest(BaseModel):
    created_at: str
    rounds: int
    options: dict[str, Any]  # the CampaignOptions every campaign was submitted with
    problems: list[EvalProblem] = Field(default_factory=list)
    calls: list[EvalCall] = Field(default_factory=list)

    def campaigns(self) -> list[EvalProblem]:
        return [p for p in self.problems if p.campaign_id]


def manifest_path(settings: Settings) -> Path:
    return settings.artifacts_dir.joinpath(*MANIFEST)


def load_manifest(settings: Settings) -> EvalManifest:
    path = manifest_path(settings)
    if not path.is_file():
        raise KernelOptError(f"{path} is missing: this home holds no llm_eval run")
    return EvalManifest.model_validate_json(path.read_text())


def save_manifest(settings: Settings, manifest: EvalManifest) -> None:
    path = manifest_path(settings)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, manifest.model_dump_json(indent=1).encode("utf-8"))


def idle_without_replies(manifest: EvalManifest, replies: int) -> str | None:
    """Why a resume given no replies could do nothing, or None when it can work.

    The last call's end states say it: when each campaign had finished or waited for
    replies (not for a GPU worker, not running), a call without replies only restarts
    the services to find the same waits.  That is almost always a stale ``home.tgz``:
    the one the asking call wrote, not the one the delivering call wrote after it.
    """
    if replies or not manifest.calls:
        return None
    states = manifest.calls[-1].states
    waiting = [s for s in states.values() if s.startswith("waiting for") and "GPU" not in s]
    if not waiting or any(s != "finished" and s not in waiting for s in states.values()):
        return None
    call = len(manifest.calls)
    return (
        f"call {call} ended with every campaign finished or waiting for replies "
        f"({len(waiting)} waiting) and no reply was given: nothing could run. Deliver the "
        "replies (--replies), or resume from the home.tgz of the call that delivered them"
    )
