"""The compile modes' Inductor options and the rules the product adds to autotuning modes."""

from __future__ import annotations

import pytest
from torch._inductor import config

from kernelopt.compile import cache
from kernelopt.compile.modes import AUTOTUNE_RULES, UnknownModeError, mode_options


def test_autotuning_modes_carry_the_rules_the_installed_torch_has() -> None:
    options = mode_options("max-autotune-no-cudagraphs")
    assert options["max_autotune"] is True
    for key, value in AUTOTUNE_RULES.items():
        assert options.get(key) == (value if hasattr(config, key) else None)


def test_modes_without_autotuning_are_left_as_torch_defines_them() -> None:
    assert mode_options("default") == {}
    options = mode_options("reduce-overhead")
    assert not set(AUTOTUNE_RULES) & set(options)


def test_an_unknown_mode_is_a_deterministic_error() -> None:
    with pytest.raises(UnknownModeError):
        mode_options("max-speed-please")


def test_compile_cache_key_names_the_rules(monkeypatch: pytest.MonkeyPatch) -> None:
    args = ("0" * 64, 1, "max-autotune-no-cudagraphs", "2.11", "3.6", "NVIDIA H200", False)
    before = cache.cache_key(*args)
    monkeypatch.setattr(cache, "AUTOTUNE_RULES", {})
    assert cache.cache_key(*args) != before
