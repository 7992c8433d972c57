"""What earlier campaigns taught the built-in proposer: which family won on which pattern.

A built-in win becomes a memory entry (``kernelopt.agents.roles.mechanical_experience``)
tagged with its family and pattern and carrying its measured gain, next to the
situation's tags (kernel kind, target kind, bottleneck).  The proposer reads those
entries back to decide which family gets the larger share of a round; the LLM prompts
see the same entries through the memory they already render.  Only measured gains of
accepted candidates are recorded, so the layer holds facts, not guesses.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from kernelopt.contracts.search import BUILTIN_FAMILIES, LAUNCH_FAMILY, builtin_family
from kernelopt.memory import ExperienceMemory, tag_score

# LIBRARY: opt-in library choices (kernelopt.proposer.library)
TEMPLATE, REWRITE, REGEN, LIBRARY = BUILTIN_FAMILIES
LAUNCH = LAUNCH_FAMILY
FAMILIES = (TEMPLATE, REWRITE, REGEN, LAUNCH, LIBRARY)
_GAIN = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)x")


def family_of(label: str) -> str:
    """The family a built-in variant's label belongs to (launch configs carry no prefix)."""
    return builtin_family(label)


def pattern_of(label: str) -> str:
    """The pattern a win generalises over: the template or rule, not its tuned parameters."""
    family = family_of(label)
    if family == LAUNCH:
        return LAUNCH
    parts = label.split(":")
    return ":".join(parts[:2])


def gain_of(effect: str) -> float | None:
    """The measured speedup an entry's effect starts with ("1.240x per kernel on ...")."""
    found = _GAIN.match(effect)
    return float(found.group(1)) if found else None


def family_gains(memory: ExperienceMemory, situation_tags: Sequence[str]) -> dict[str, float]:
    """The best remembered gain of each family on kernels of the same kind as this one."""
    kind_tags = [t for t in situation_tags if t.startswith("kind/")]
    if not kind_tags:
        return {}
    gains: dict[str, float] = {}
    for entry in memory.entries.values():
        if tag_score(kind_tags, entry.tags) < len(kind_tags):
            continue  # another kind of kernel: its lesson does not transfer
        family = next((t.split("/", 1)[1] for t in entry.tags if t.startswith("direction/")), "")
        gain = gain_of(entry.effect)
        if family in FAMILIES and gain is not None and gain > 1.0:
            gains[family] = max(gains.get(family, 1.0), gain)
    return gains


def template_share(count: int, gains: dict[str, float]) -> int:
    """How many of a round's ``count`` candidates go to expert templates.

    Half by default.  All of them when templates won here before and launch configs
    did not do better; a quarter when launch configs won and templates never did.
    """
    default = (count + 1) // 2
    template, launch = gains.get(TEMPLATE), gains.get(LAUNCH)
    if template is not None and (launch is None or template >= launch):
        return count
    if launch is not None and template is None:
        return max(1, count // 4) if count > 1 else 0
    return default


def regen_first(gains: dict[str, float]) -> bool:
    """Whether Inductor regeneration leads a whole-forward round: it won here before and
    algebraic rewrites did not do better."""
    regen, rewrite = gains.get(REGEN), gains.get(REWRITE)
    return regen is not None and (rewrite is None or regen > rewrite)
