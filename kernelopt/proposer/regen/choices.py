"""Which Inductor options the regeneration family moves, probed in the installed torch."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

REGEN = "regen"
_MISSING = object()


@dataclass(frozen=True)
class Choice:
    """One Inductor option and the values to try instead of the baseline's.

    ``values`` empty means the boolean flip.  ``backends`` says whose code the option
    shapes ("triton" on GPUs, "cpp" on the CPU), so a CPU run does not spend
    compiles on options its backend never reads.
    """

    option: str
    backends: tuple[str, ...] = ("triton",)
    values: tuple[Any, ...] = ()

    def alternatives(self, current: Any) -> list[Any]:
        if not self.values:
            return [not current] if isinstance(current, bool) else []
        return [v for v in self.values if v != current]


BOTH = ("triton", "cpp")
# reduction strategy and tiling first (where Inductor's heuristics choose most), then fusion
CHOICES: tuple[Choice, ...] = (
    Choice("triton.persistent_reductions"),
    Choice("split_reductions", BOTH),
    Choice("triton.cooperative_reductions"),
    Choice("triton.multi_kernel", values=(1,)),
    Choice("coordinate_descent_tuning"),
    Choice("triton.max_tiles", values=(3,)),
    Choice("triton.prefer_nd_tiling"),
    Choice("triton.tile_reductions"),
    Choice("aggressive_fusion", BOTH),
    Choice("epilogue_fusion", BOTH),
    Choice("max_autotune_pointwise"),
    Choice("cpp.max_horizontal_fusion_size", ("cpp",), values=(1,)),
    Choice("cpp.enable_loop_tail_vec", ("cpp",)),
)


def config_value(option: str) -> Any:
    """The installed torch's value of a dotted Inductor option, or ``_MISSING``."""
    from torch._inductor import config

    value: Any = config
    for part in option.split("."):
        value = getattr(value, part, _MISSING)
        if value is _MISSING:
            return _MISSING
    return value


def single_diffs(
    backend: str, base: dict[str, Any], choices: Sequence[Choice] = CHOICES
) -> list[dict[str, Any]]:
    """One-option diffs from ``base`` (the compile mode's patches) for options that exist here.

    Options the installed torch does not have are skipped, so one list serves
    every torch version the product runs on.
    """
    out = []
    for choice in choices:
        if backend not in choice.backends:
            continue
        default = config_value(choice.option)
        if default is _MISSING:
            continue
        current = base.get(choice.option, default)
        out.extend({choice.option: value} for value in choice.alternatives(current))
    return out


def label_of(diff: dict[str, Any]) -> str:
    """``regen:persistent_reductions=False`` (sorted, ``triton.`` dropped: it is the default)."""
    parts = sorted(f"{k.removeprefix('triton.')}={v}" for k, v in diff.items())
    return f"{REGEN}:" + ",".join(parts)
