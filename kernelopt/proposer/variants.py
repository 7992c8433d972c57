"""The launch-configuration space of an Inductor kernel, and which points to try next.

Rules of thumb the space respects (each one keeps a variant plausible, not
just legal):

* block sizes are powers of two within Inductor's own maxima
  (``TRITON_MAX_BLOCK``: X 4096, Y/Z 1024, R 4096 here), so masks Inductor
  elided for multiples of the maximum block stay valid;
* a block never exceeds the next power of two of its dimension's size hint;
* 1 to 64 elements per thread (``block elements / (32 * num_warps)``);
* pointwise kernels are not pipelined (one stage); loop reductions try 1-3
  stages;
* ``no_x_dim`` reductions keep ``XBLOCK = 1``.

From the root the proposer draws the most promising untried configs by a
prior (elements per thread, grid fill, warps, stages), preferring distinct
block sizes; from a state that is already pinned it walks to neighbours
(each block x2 / /2, warps x2 / /2, stages +-1) -- so the beam runs several
coordinate-descent walks from the best measured points.
"""

from __future__ import annotations

import math
from itertools import product
from typing import Any

from kernelopt.proposer.inductor_source import InductorKernel, config_label

MAX_BLOCK = {"X": 4096, "Y": 1024, "Z": 1024, "R0_": 4096, "R1_": 4096}
WARPS = (1, 2, 4, 8, 16)
MIN_PER_THREAD = 1
MAX_PER_THREAD = 64


def _next_pow2(n: int) -> int:
    p = 1
    while p < n:
        p *= 2
    return p


def _prefix(block_param: str) -> str:
    """'XBLOCK' -> 'X', 'R0_BLOCK' -> 'R0_'."""
    return block_param[: -len("BLOCK")]


def _hint(kernel: InductorKernel, block_param: str) -> int:
    key = _prefix(block_param).lower()
    return int(kernel.size_hints.get(key, MAX_BLOCK.get(_prefix(block_param), 1024)))


def _block_choices(kernel: InductorKernel, block_param: str) -> list[int]:
    if block_param == "XBLOCK" and kernel.no_x_dim:
        return [1]
    cap = min(
        MAX_BLOCK.get(_prefix(block_param), 1024), _next_pow2(max(1, _hint(kernel, block_param)))
    )
    smallest = 1 if block_param in ("XBLOCK", "YBLOCK") and kernel.heuristic != "pointwise" else 16
    out, b = [], smallest
    while b <= cap:
        out.append(b)
        b *= 2
    return out or [cap]


def _elements(kernel: InductorKernel, config: dict[str, Any]) -> int:
    total = 1
    for param in kernel.block_params:
        total *= int(config.get(param, 1))
    for value in kernel.body_blocks.values():  # persistent reductions: R0_BLOCK in the body
        total *= value
    return total


def plausible(kernel: InductorKernel, config: dict[str, Any]) -> bool:
    warps = int(config.get("num_warps", 4))
    per_thread = _elements(kernel, config) / (32 * warps)
    if not MIN_PER_THREAD <= per_thread <= MAX_PER_THREAD:
        return False
    if _elements(kernel, config) > 16384:  # register pressure: Inductor's own tiles stay below
        return False
    stages = int(config.get("num_stages", 1))
    if base_heuristic(kernel) != "reduction" and stages != 1:
        return False
    return 1 <= stages <= 4


def base_heuristic(kernel: InductorKernel) -> str:
    """The kernel's nature even when pinned: a fixed_config kernel with R0_BLOCK loops."""
    if kernel.heuristic != "fixed_config":
        return kernel.heuristic
    if any(p.startswith("R") for p in kernel.block_params):
        return "reduction"
    if kernel.body_blocks:
        return "persistent_reduction"
    return "pointwise"


def config_space(kernel: InductorKernel) -> list[dict[str, Any]]:
    """Every plausible config, in a fixed order."""
    heuristic = base_heuristic(kernel)
    block_lists = [_block_choices(kernel, p) for p in kernel.block_params]
    stages = (1, 2, 3) if heuristic == "reduction" else (1,)
    space = []
    for blocks, warps, stage in product(product(*block_lists), WARPS, stages):
        config: dict[str, Any] = dict(zip(kernel.block_params, blocks, strict=True))
        config["num_warps"] = warps
        config["num_stages"] = stage
        if plausible(kernel, config):
            space.append(config)
    return space


def neighbours(kernel: InductorKernel, config: dict[str, Any]) -> list[dict[str, Any]]:
    """Configs one step away from ``config`` (coordinate-descent moves), plausible ones only."""
    moves: list[dict[str, Any]] = []
    for param in kernel.block_params:
        for factor in (2, 0.5):
            value = int(int(config.get(param, 1)) * factor)
            if value >= 1 and value in _block_choices(kernel, param):
                moves.append({**config, param: value})
    warps = int(config.get("num_warps", 4))
    for value in (warps * 2, warps // 2):
        if value in WARPS:
            moves.append({**config, "num_warps": value})
    stages = int(config.get("num_stages", 1))
    for value in (stages + 1, stages - 1):
        moves.append({**config, "num_stages": value})
    seen: set[str] = set()
    out = []
    for move in moves:
        label = config_label(move)
        if label not in seen and plausible(kernel, move):
            seen.add(label)
            out.append(move)
    return out


def prior_cost(kernel: InductorKernel, config: dict[str, Any]) -> float:
    """How unlikely a config is to pay, before measuring (lower is better).

    Penalises elements per thread away from a sweet spot (4-8 for pointwise:
    128-bit vector loads; 16 for reductions), grids too small to fill every
    SM, extreme warp counts and deep pipelines.  It only orders the space;
    the gates' timing decides.
    """
    warps = int(config.get("num_warps", 4))
    per_thread = _elements(kernel, config) / (32 * warps)
    ideal = 6.0 if base_heuristic(kernel) == "pointwise" else 16.0
    cost = abs(math.log2(per_thread) - math.log2(ideal))
    programs = 1
    for param in kernel.block_params:
        if not param.startswith("R"):
            programs *= -(-_hint(kernel, param) // int(config.get(param, 1)))
    if programs < kernel.sm_count:
        cost += math.log2(kernel.sm_count / programs)
    cost += 0.25 * abs(math.log2(warps) - 2.5)
    cost += 0.3 * (int(config.get("num_stages", 1)) - 1)
    return cost


def ranked(kernel: InductorKernel, configs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Configs by prior cost, ties by label: the order the root's variants are drawn in."""
    return sorted(configs, key=lambda c: (round(prior_cost(kernel, c), 6), config_label(c)))


def pick_diverse(
    configs: list[dict[str, Any]], count: int, block_params: list[str]
) -> list[dict[str, Any]]:
    """The first ``count`` configs, preferring ones whose block sizes differ from those picked."""
    picked: list[dict[str, Any]] = []
    blocks_seen: set[tuple[int, ...]] = set()
    for config in configs:
        key = tuple(int(config.get(p, 1)) for p in block_params)
        if key in blocks_seen:
            continue
        picked.append(config)
        blocks_seen.add(key)
        if len(picked) == count:
            return picked
    for config in configs:  # not enough distinct block sizes: fill with the rest, in order
        if len(picked) == count:
            break
        if config not in picked:
            picked.append(config)
    return picked
