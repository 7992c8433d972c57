"""Gate 4's opt-in levers as command-line flags, for the scripts that A/B them on the GPU.

Each lever is a ``GateSettings`` field, off by default until an H200 run shows it helps
(those on by default, turns and their brief preparation, take an explicit 0 to turn them
off); the identity corpus and the verdict-cost benchmark take the same flags and name
the levers in every row they write, so two runs can be compared side by side.
"""

from __future__ import annotations

import argparse
from typing import Any

# flag -> (GateSettings field, type, help)
LEVERS: dict[str, tuple[str, type, str]] = {
    "--settle-wall": ("settle_step_wall_ms", float, "settling steps sized by wall time (ms)"),
    "--prestart-timing": ("prestart_timing", bool, "build the first round's baseline early"),
    "--quiet-wait": ("quiet_gpu_wait_s", float, "wait for other GPU work before a round (s)"),
    "--turns": ("turn_pairs", int, "turn sessions of this many ABBA pairs (gates/README.md)"),
    "--host-clock-turns": (
        "host_clock_turns",
        int,
        "turn sessions of this many pairs once a paired round rests on the host clock",
    ),
    "--turn-prep-calls": (
        "turn_prep_calls",
        int,
        "turn children prepare without settling, events at most this many calls",
    ),
    "--probe-child": (
        "turn_probe_child",
        bool,
        "turn sessions' idle probe in a third trusted child, not the baseline's",
    ),
    "--reuse-host-probe": (
        "reuse_host_probe",
        bool,
        "a baseline found dispatch-bound before goes to turns without a probe round",
    ),
}


def add_lever_arguments(parser: argparse.ArgumentParser) -> None:
    """One flag per lever, each at ``GateSettings``' default unless given (0 given: off)."""
    for flag, (field, kind, text) in LEVERS.items():
        if kind is bool:
            parser.add_argument(flag, action="store_true", help=f"{text} ({field})")
        else:
            parser.add_argument(flag, type=kind, default=None, help=f"{text} ({field})")


def levers_from(args: argparse.Namespace) -> dict[str, Any]:
    """The levers a run turns on, as ``GateSettings`` fields (nothing given: today's gate)."""
    chosen: dict[str, Any] = {}
    for flag, (field, _kind, _text) in LEVERS.items():
        value = getattr(args, flag.lstrip("-").replace("-", "_"))
        if value is not None and value is not False:
            chosen[field] = value
    return chosen
