"""The A/B scripts' lever flags name real ``GateSettings`` fields and set only what is given."""

from __future__ import annotations

import argparse

from kernelopt.contracts.verdicts import GateSettings
from scripts.gate_levers import LEVERS, add_lever_arguments, levers_from


def _parse(*argv: str) -> dict[str, object]:
    parser = argparse.ArgumentParser()
    add_lever_arguments(parser)
    return levers_from(parser.parse_args(list(argv)))


def test_no_flag_is_todays_gate() -> None:
    assert _parse() == {}


def test_each_flag_sets_its_field_and_the_settings_take_it() -> None:
    chosen = _parse("--settle-wall", "50", "--prestart-timing", "--turns", "12")
    assert chosen == {"settle_step_wall_ms": 50.0, "prestart_timing": True, "turn_pairs": 12}
    settings = GateSettings(device="cuda", **chosen)
    assert settings.turn_pairs == 12 and settings.prestart_timing


def test_every_lever_is_a_gate_setting() -> None:
    defaults = GateSettings(device="cuda")
    for field, _kind, _text in LEVERS.values():
        assert hasattr(defaults, field), field


def test_zero_turns_off_a_lever_that_is_on_by_default() -> None:
    assert GateSettings(device="cuda").host_clock_turns > 0
    chosen = _parse("--host-clock-turns", "0")
    assert chosen == {"host_clock_turns": 0}
    assert GateSettings(device="cuda", **chosen).host_clock_turns == 0
