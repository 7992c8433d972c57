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

from kernelopt.proposer.regen.candidate import HEADER, candidate_source, read_header
from kernelopt.proposer.regen.choices import BOTH, CHOICES, REGEN, Choice, label_of, single_diffs
from kernelopt.proposer.regen.code import (
    Regenerated,
    RegenError,
    generated_code,
    normalised,
    regenerate,
)
from kernelopt.proposer.regen.family import RegenFamily, propose_regen

__all__ = [
    "BOTH",
    "CHOICES",
    "HEADER",
    "REGEN",
    "Choice",
    "RegenError",
    "RegenFamily",
    "Regenerated",
    "candidate_source",
    "generated_code",
    "label_of",
    "normalised",
    "propose_regen",
    "read_header",
    "regenerate",
    "single_diffs",
]
