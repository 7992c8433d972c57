"""Search policy: every decision SearchKernel makes, as pure, deterministic code.

The workflow only sequences activities; which states to expand, which
directions to ban, which winners to re-time, when the budget is spent and
which candidate is best are answered here.  Standard library only, no I/O,
no clocks, no randomness: the same inputs give the same answers on every
replay, and every rule is unit-tested on the CPU.

The tree (docs/method.md, "Search"): the root is Inductor's kernel; children are
candidates that passed gates 1-2.  Every evaluated candidate backs up a reward
to its parent and all ancestors (rejected ones back up 0), so UCB with
c = 1.4 prefers states whose children tend to be fast and verified, while
rarely-expanded states keep an exploration bonus.  Only re-timed states may
seed a round: a winner measured once may just have been lucky (docs/method.md, "Checker").
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

from kernelopt.contracts.directions import normalize_direction

ROOT_ID = "root"
UCB_C = 1.4


def reward(speedup: float | None) -> float:
    """Squash a per-kernel speedup into [0, 1): UCB's exploration term assumes bounded rewards.

    ``s / (1 + s)`` is monotonic, gives the root (1.0x) 0.5 and a rejected
    candidate (no speedup) 0, and keeps a 10x outlier from drowning the means.
    """
    if speedup is None or speedup <= 0:
        return 0.0
    return speedup / (1.0 + speedup)


@dataclass
class Node:
    """One kernel state.  ``speedup`` is baseline_kernel_ms / kernel_ms (root: 1.0)."""

    id: str
    parent_id: str | None
    depth: int
    iteration: int
    source_sha: str
    speedup: float | None = None
    first_speedup: float | None = None  # the measurement before re-timing
    kernel_ms: float | None = None
    baseline_ms: float | None = None
    retimed: bool = False
    dropped: bool = False  # failed its re-timing: never seeds, never wins
    visits: int = 0
    value_sum: float = 0.0
    direction: str = ""
    label: str = ""

    @property
    def mean(self) -> float:
        return self.value_sum / self.visits if self.visits else 0.0


def beats_root(node: Node) -> bool:
    """Faster than the root by its (kept) measurement: the only states that can win."""
    return node.speedup is not None and node.speedup > 1.0


def fastest_first(nodes: list[Node]) -> list[Node]:
    """By measured speedup, best first; ``nodes`` in insertion order break ties (stable sort)."""
    return sorted(nodes, key=lambda n: -(n.speedup or 0.0))


@dataclass
class SearchTree:
    """A rooted tree of kernel states with UCB bookkeeping."""

    nodes: dict[str, Node] = field(default_factory=dict)
    order: list[str] = field(default_factory=list)  # insertion order: deterministic ties
    # source digests of pruned nodes (16 hex digits each): a pruned kernel is still a duplicate
    pruned_sources: list[str] = field(default_factory=list)

    @classmethod
    def with_root(cls, source_sha: str, kernel_ms: float | None = None) -> SearchTree:
        tree = cls()
        root = Node(
            id=ROOT_ID,
            parent_id=None,
            depth=0,
            iteration=-1,
            source_sha=source_sha,
            speedup=1.0,
            first_speedup=1.0,
            kernel_ms=kernel_ms,
            baseline_ms=kernel_ms,
            retimed=True,  # the reference itself: nothing to re-time
            visits=1,
            value_sum=reward(1.0),
        )
        tree._insert(root)
        return tree

    @property
    def root(self) -> Node:
        return self.nodes[ROOT_ID]

    def _insert(self, node: Node) -> None:
        self.nodes[node.id] = node
        self.order.append(node.id)

    def ancestors(self, node_id: str) -> list[Node]:
        """The node and every ancestor up to the root, nearest first."""
        chain: list[Node] = []
        current: str | None = node_id
        while current is not None:
            node = self.nodes[current]
            chain.append(node)
            current = node.parent_id
        return chain

    def has_source(self, source_sha: str) -> bool:
        if source_sha[:16] in self.pruned_sources:
            return True
        return any(n.source_sha == source_sha and not n.dropped for n in self.nodes.values())

    def prune(self, keep: int, c: float = UCB_C) -> list[str]:
        """Forget all but the states that can still matter; returns the removed ids.

        A long search adds a node per verified candidate, and the tree rides in
        the workflow's carried state, so it must not grow without bound.  Kept:
        the root, the ``keep`` best eligible states by speedup and the ``keep``
        best by UCB score (the next beams come from these), and every ancestor
        of a kept state.  Removed nodes' visits and rewards already sit in their
        ancestors, so the kept states' UCB scores do not change; candidates that
        were never re-timed, dropped states and losing leaves go.  Their source
        digests stay for duplicate detection; their decisions are in the log.
        """
        if len(self.nodes) - 1 <= keep:
            return []
        position = {node_id: i for i, node_id in enumerate(self.order)}
        eligible = [n for n in self.eligible() if n.id != ROOT_ID]
        by_speed = sorted(eligible, key=lambda n: (-(n.speedup or 0.0), position[n.id]))
        by_ucb = sorted(eligible, key=lambda n: (-self.ucb(n.id, c), position[n.id]))
        kept: set[str] = set()
        for node in [self.root, *by_speed[:keep], *by_ucb[:keep]]:
            kept.update(a.id for a in self.ancestors(node.id))
        removed = [i for i in self.order if i not in kept]
        for node_id in removed:
            node = self.nodes.pop(node_id)
            digest = node.source_sha[:16]
            # a dropped state's source may be proposed again (has_source ignores it too)
            if not node.dropped and digest not in self.pruned_sources:
                self.pruned_sources.append(digest)
        self.order = [i for i in self.order if i in kept]
        return removed

    def record_rejection(self, parent_id: str) -> None:
        """A candidate of ``parent_id`` failed: one more visit, no value, for it and its ancestors."""
        for node in self.ancestors(parent_id):
            node.visits += 1

    def add_child(
        self,
        parent_id: str,
        node_id: str,
        source_sha: str,
        iteration: int,
        kernel_ms: float | None,
        baseline_ms: float | None,
        direction: str = "",
        label: str = "",
    ) -> Node:
        """A verified candidate becomes a state; its reward backs up to every ancestor."""
        if node_id in self.nodes:
            raise ValueError(f"node {node_id!r} already exists")
        parent = self.nodes[parent_id]
        speedup = measured_speedup(kernel_ms, baseline_ms)
        node = Node(
            id=node_id,
            parent_id=parent_id,
            depth=parent.depth + 1,
            iteration=iteration,
            source_sha=source_sha,
            speedup=speedup,
            first_speedup=speedup,
            kernel_ms=kernel_ms,
            baseline_ms=baseline_ms,
            direction=direction,
            label=label,
        )
        self._insert(node)
        r = reward(speedup)
        for n in self.ancestors(node_id):
            n.visits += 1
            n.value_sum += r
        return node

    def apply_retime(
        self, node_id: str, kernel_ms: float | None, baseline_ms: float | None, ok: bool
    ) -> Node:
        """Record a winner's second measurement.

        The conservative minimum of both speedups is kept: a state must be fast
        twice to seed the next round.  A failed re-time (the candidate no longer
        passes, or could not be timed) drops the node for good.
        """
        node = self.nodes[node_id]
        old = reward(node.speedup)
        if not ok:
            node.dropped = True
            node.retimed = True
            new_speedup: float | None = None
        else:
            second = measured_speedup(kernel_ms, baseline_ms)
            candidates = [s for s in (node.first_speedup, second) if s is not None]
            new_speedup = min(candidates) if candidates else None
            node.retimed = True
            if second is not None:
                node.kernel_ms, node.baseline_ms = kernel_ms, baseline_ms
        node.speedup = new_speedup
        delta = reward(new_speedup) - old
        for n in self.ancestors(node_id):
            n.value_sum += delta
        return node

    def eligible(self) -> list[Node]:
        """States that may seed a round: the root and re-timed, not dropped children."""
        return [
            self.nodes[i] for i in self.order if self.nodes[i].retimed and not self.nodes[i].dropped
        ]

    def ucb(self, node_id: str, c: float = UCB_C) -> float:
        node = self.nodes[node_id]
        if node.visits == 0:
            return math.inf
        total = max(self.root.visits, 1)
        return node.mean + c * math.sqrt(math.log(total) / node.visits) if total > 1 else node.mean

    def winners_to_retime(self, iteration: int, width: int, last: bool = False) -> list[Node]:
        """This iteration's verified candidates that could enter the beam, best first.

        At most ``width`` of them (the beam cannot take more), ranked by their
        first measurement; ties by insertion order.  After the ``last`` round no
        beam follows, so only states that can still become a result are worth a
        second gate run: the minimum of both timings is kept, so a state not
        faster than the root the first time never can be (on the H200 that is
        ~40 GPU-s saved per losing candidate).
        """
        fresh = [
            self.nodes[i]
            for i in self.order
            if self.nodes[i].iteration == iteration
            and not self.nodes[i].retimed
            and self.nodes[i].speedup is not None
            and (not last or beats_root(self.nodes[i]))
        ]
        return fastest_first(fresh)[:width]

    def best(self) -> Node | None:
        """The re-timed, verified state with the highest speedup, if it beats the root."""
        ranked = self.ranked_winners(1)
        return ranked[0] if ranked else None

    def ranked_winners(self, count: int) -> list[Node]:
        """Up to ``count`` re-timed, verified states faster than the root, best first.

        The ones after the first are the model gates' second chances: a winner
        that fails V_model or V_perf on the whole model need not end the target.
        """
        winners = [n for n in self.eligible() if n.id != ROOT_ID and beats_root(n)]
        return fastest_first(winners)[:count]

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "order": list(self.order),
            "nodes": [asdict(self.nodes[i]) for i in self.order],
        }
        if self.pruned_sources:  # absent until a prune: older carried states stay the same
            out["pruned_sources"] = list(self.pruned_sources)
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SearchTree:
        tree = cls(pruned_sources=list(data.get("pruned_sources", [])))
        for raw in data.get("nodes", []):
            tree._insert(Node(**raw))
        return tree


def measured_speedup(kernel_ms: float | None, baseline_ms: float | None) -> float | None:
    """baseline / candidate when both are positive numbers, else None (nothing to rank by)."""
    if kernel_ms is None or baseline_ms is None or kernel_ms <= 0 or baseline_ms <= 0:
        return None
    return baseline_ms / kernel_ms


@dataclass(frozen=True)
class BeamUCB:
    """Beam selection: the ``width`` eligible states with the highest UCB score.

    Ties (e.g. unvisited states) break by speedup, then by insertion order, so
    selection is a pure function of the tree.  States with the same source
    count once.
    """

    width: int = 4
    c: float = UCB_C

    def select(self, tree: SearchTree) -> list[Node]:
        ranked = sorted(
            tree.eligible(),
            key=lambda n: (-tree.ucb(n.id, self.c), -(n.speedup or 0.0), tree.order.index(n.id)),
        )
        chosen: list[Node] = []
        seen: set[str] = set()
        for node in ranked:
            if node.source_sha in seen:
                continue
            seen.add(node.source_sha)
            chosen.append(node)
            if len(chosen) == self.width:
                break
        return chosen


def meltdown_bans(history: list[str], window: int = 6, max_distinct: int = 2) -> list[str]:
    """Directions to ban when the last ``window`` plans collapse onto <= ``max_distinct`` approaches.

    docs/method.md, "Search": a planner stuck on one or two ideas is forced to
    diversify by banning them in the next planning prompt.  Fewer than
    ``window`` plans so far: nothing to judge yet.
    """
    recent = [normalize_direction(d) for d in history[-window:] if normalize_direction(d)]
    if len(recent) < window:
        return []
    distinct = sorted(set(recent))
    return distinct if len(distinct) <= max_distinct else []


@dataclass(frozen=True)
class Spend:
    tokens: int = 0
    usd: float = 0.0
    gpu_seconds: float = 0.0
    wall_seconds: float = 0.0


def budget_exhausted(spend: Spend, budget_left: dict[str, float | None]) -> str | None:
    """The first allowance ``spend`` has used up, by name, or None.  Missing/None = unlimited."""
    used = {
        "tokens": float(spend.tokens),
        "usd": spend.usd,
        "gpu_seconds": spend.gpu_seconds,
        "wall_seconds": spend.wall_seconds,
    }
    for key in ("tokens", "usd", "gpu_seconds", "wall_seconds"):
        limit = budget_left.get(key)
        if limit is not None and used[key] >= limit:
            return key
    return None


def remaining(spend: Spend, budget_left: dict[str, float | None]) -> dict[str, float | None]:
    """What is left of each allowance (None = unlimited), for progress queries."""
    used = asdict(spend)
    left: dict[str, float | None] = {}
    for key in ("tokens", "usd", "gpu_seconds", "wall_seconds"):
        limit = budget_left.get(key)
        left[key] = None if limit is None else max(0.0, limit - float(used[key]))
    return left


# gates whose failures go back to the executor (docs/method.md, "Agents": retry-fix); "model" (gate 3,
# float64) decides only for searches that run it (search_kernel.GATE3_PATCH)
FIXABLE_GATES = ("static", "correctness", "model", "parse")


def should_retry_fix(failed_gate: str, attempt: int, max_retries: int) -> bool:
    """Compile/run errors, wrong numbers and float64 errors are fixable in one conversation, K times."""
    return failed_gate in FIXABLE_GATES and attempt < max_retries
