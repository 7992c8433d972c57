"""The regeneration strategy: the diffs a round offers, deduped by code, cached, budgeted."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kernelopt.contracts.base import ArtifactRef
from kernelopt.contracts.compiled import CompileResult
from kernelopt.contracts.search import BuiltinProposeInput, BuiltinVariant
from kernelopt.log import get_logger
from kernelopt.proposer.regen.candidate import read_header, regenerated_candidate
from kernelopt.proposer.regen.choices import CHOICES, REGEN, Choice, label_of, single_diffs
from kernelopt.proposer.regen.code import RegenError, digest, generated_code
from kernelopt.proposer.targets import not_whole_forward
from kernelopt.store import ArtifactStore

log = get_logger(__name__)
_ERROR = "error"
# DigestCache entries "built v<N> <label>": the stored candidate's sha256.  N is the
# builder's version: candidates an older builder made (whose dynamic-shape wrapper
# could refuse held-out shapes, or which returned every graph output) are built again.
BUILT = "built v3 "
WHY = "why "  # entries "why <label>": the reason a regeneration failed, for the search's note


def _file_name(label: str) -> str:
    return f"{label.replace(':', '_')}.py"


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
    """Code digests of earlier regenerations of one graph, by diff label, on disk, and the
    candidates built from them (``BUILT``).

    A later round (or campaign, or an attempt on the next machine: the folder moves with
    ``kernelopt state export``) then knows which diffs change nothing, and which it built,
    without compiling them again.
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


@dataclass(frozen=True)
class _Graph:
    """What one round regenerates from: the problem, its device, the state's options
    (``base``) and where the graph's digests and built candidates are remembered."""

    cache: DigestCache
    store: ArtifactStore
    source: str
    seed: int
    device: str
    base: dict[str, Any]


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
        refused = not_whole_forward(inp, "Inductor regeneration applies")
        if refused:
            return [], refused
        device = generation_device(inp.compiled)
        if device is None:
            return [], "the baseline was compiled for a GPU this process cannot see"
        from kernelopt.compile.modes import mode_options

        source = store.get_text(inp.compiled.problem.source)
        state = read_header(store.get_text(inp.state_source)) or {}
        # the capture's own options (eager's random ops for a forward that draws), else the
        # mode's: a regeneration must draw what the baseline and the seeded reference draw
        captured = inp.compiled.inductor_options or mode_options(inp.compiled.mode)
        base = {**captured, **state}
        backend = "cpp" if device == "cpu" else "triton"
        diffs = [
            {**state, **one}
            for one in single_diffs(backend, base, self.choices)
            if not set(one) & set(state)
        ]
        cache = DigestCache(
            self.cache_dir or default_cache_dir(), graph_key(inp.compiled, source, device)
        )
        graph = _Graph(cache, store, source, inp.compiled.problem.seed, device, base)
        started = time.monotonic()
        code = self._digest_of(graph, state)
        if code is None:
            why = cache.get(WHY + label_of(state)) or "the worker's log says why"
            return [], f"Inductor's forward cannot be regenerated here: {why}"
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
            found = self._digest_of(graph, diff)
            if found is None:
                continue
            if found in seen:  # the same code as the state's or an earlier candidate's
                same += 1
                continue
            seen.add(found)
            ref = self._built(graph, diff)
            if ref is None:
                continue
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

    def _built(self, g: _Graph, diff: dict[str, Any]) -> ArtifactRef | None:
        """The candidate for ``diff``, built once per graph: an attempt cut by a lost machine
        (two whole-model compiles, minutes on a large model) is not built again."""
        label = label_of(diff)
        known = g.cache.get(BUILT + label)
        if known is not None and g.store.exists(known):
            return g.store.put_text(g.store.get_text(known), "text/x-python", _file_name(label))
        started = time.monotonic()
        try:
            text = self.build(g.source, g.seed, g.device, {**g.base, **diff}, diff)
        except Exception as exc:  # as in _digest_of: a diff that cannot be built is skipped
            log.info("regeneration not buildable", label=label, error=str(exc)[:300])
            g.cache.put(label, _ERROR)
            return None
        log.info("regeneration built", label=label, seconds=round(time.monotonic() - started, 1))
        ref = g.store.put_text(text, "text/x-python", _file_name(label))
        g.cache.put(BUILT + label, ref.sha256)
        return ref

    def _digest_of(self, g: _Graph, diff: dict[str, Any]) -> str | None:
        label = label_of(diff)
        known = g.cache.get(label)
        if known == _ERROR and g.cache.get(WHY + label) is None:
            known = None  # a failure recorded before reasons were: this code may not fail
        if known is not None:
            return None if known == _ERROR else known
        started = time.monotonic()
        try:
            found = digest(self.generate(g.source, g.seed, g.device, {**g.base, **diff}))
        except Exception as exc:  # Inductor and the user's module ran here: a failure is a note
            why = str(exc) if isinstance(exc, RegenError) else f"{type(exc).__name__}: {exc}"
            log.info("regeneration failed", label=label, error=why[:300])
            g.cache.put(WHY + label, why[:300])
            g.cache.put(label, _ERROR)
            return None
        log.info("regenerated", label=label, seconds=round(time.monotonic() - started, 1))
        g.cache.put(label, found)
        return found


FAMILY = RegenFamily()


def propose_regen(
    inp: BuiltinProposeInput, store: ArtifactStore, count: int, exclude: set[str]
) -> tuple[list[BuiltinVariant], str]:
    """The built-in proposer's entry: the default regeneration strategy."""
    return FAMILY.propose(inp, store, count, exclude)
