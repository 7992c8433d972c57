"""gates.index_ties: an index op's near-tied alternates, recorded in the float64 run and
excused in gate 2's comparison; any other wrong index is still wrong."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch

from gates.index_ties import MAX_ALTERNATES, IndexRecorder, index_ties, matches_alternate
from gates.numerics import compare_outputs

SCORES = torch.tensor(
    [
        [0.1, 0.9, 0.9 - 1e-6, 0.2],  # a near-tie: 1 and 2
        [3.0, 3.0, 3.0, -1.0],  # an exact three-way tie
        [0.5, -0.5, 0.0, 0.25],  # no tie
    ],
    dtype=torch.float64,
)


def _recorded(
    forward: Callable[[torch.Tensor], Any], data: torch.Tensor = SCORES
) -> tuple[list, Any]:
    """The forward's output leaves on ``data`` and their alternates (None: no near-ties)."""
    recorder = IndexRecorder()
    with recorder:
        out = forward(data)
    leaves = list(out) if isinstance(out, tuple) else [out]
    return leaves, index_ties(leaves, recorder.calls, rtol=1e-3, atol=1e-3)


def _gate_2_passes(got: list, eager: torch.Tensor, ref64: torch.Tensor, ties: Any) -> bool:
    """Gate 2's comparison of one index leaf with the float64 run's index and alternates."""
    return compare_outputs(
        [torch.tensor(got)],
        [eager],
        rtol=1e-3,
        atol=1e-3,
        scale_tol=2e-3,
        refs64=[ref64],
        ties64=[ties],
    ).ok


def test_argmax_keeps_the_near_tied_positions_of_each_row() -> None:
    (index,), ties = _recorded(lambda s: s.argmax(dim=1))
    assert index.tolist() == [1, 0, 0]
    assert ties[0].tolist() == [[0, 1], [0, 2], [1, 0], [1, 1], [1, 2]]  # no row 2: no tie


def test_max_along_a_dim_and_argmax_over_all_are_recorded_and_copies_are_not() -> None:
    _, ties = _recorded(lambda s: tuple(s.max(dim=1)))
    assert ties[0] is None and ties[1] is not None  # the values are compared as floats
    _, ties = _recorded(lambda s: (s.argmax(), s.argmax(dim=1).clone()))
    assert ties is not None and ties[1] is None  # a copy is not the op's result
    assert ties[0].tolist() == [[0, 4], [0, 5], [0, 6]]
    _, none = _recorded(lambda s: s[2:].argmax(dim=1))
    assert none is None  # no near-tie anywhere: nothing kept


def test_gate_2_excuses_a_tied_index_and_still_refuses_a_wrong_one() -> None:
    (index,), ties = _recorded(lambda s: s.argmax(dim=1))
    eager = torch.tensor([2, 1, 0])  # a lower precision picked other tied positions

    def compare(got: list[int]) -> bool:
        return _gate_2_passes(got, eager, index, ties[0])

    assert compare([1, 2, 0])  # the float64 run's tie partners
    assert compare([2, 0, 0])
    assert not compare([1, 3, 0])  # row 1: position 3 scores -1, far from the top
    assert not compare([1, 1, 3])  # row 2 has no tie


def test_sampled_values_match_by_their_element_and_garbage_never_does() -> None:
    """The timed calls' checks hold samples as float64 values at flat positions."""
    ties = torch.tensor([[0, 1], [0, 2], [5, 7]])
    got = torch.tensor([[2.0, 7.0, 7.0], [1.5, -1.0, 2.0 + 2**32]], dtype=torch.float64)
    elements = torch.tensor([[0, 5, 0], [0, 0, 0]])
    assert matches_alternate(got, elements, ties).tolist() == [
        [True, True, False],
        [False, False, False],  # not a position, negative, past the key's range
    ]


def test_an_index_where_every_score_ties_keeps_a_bounded_number_of_positions() -> None:
    _, (ties,) = _recorded(lambda s: s.argmax(dim=1), torch.zeros(2, 500, dtype=torch.float64))
    assert ties.shape == (2 * MAX_ALTERNATES, 2)


def test_topk_and_sort_keep_each_slots_near_tied_positions() -> None:
    """Slot j of a row may name any position whose score is near the j-th chosen one; the
    elements are the index output's own flat positions, whichever dim was sorted."""
    (_, top), ties = _recorded(lambda s: tuple(s.topk(2, dim=1)))
    assert top[0].tolist() == [1, 2] and top[2].tolist() == [0, 3]  # row 1: any two of three
    # row 0: both slots lie in the near-tie 1, 2; row 1: both in the three-way tie
    assert ties[1].tolist() == [
        [0, 1],
        [0, 2],
        [1, 1],
        [1, 2],
        *([e, p] for e in (2, 3) for p in (0, 1, 2)),
    ]
    (_, order), ties = _recorded(lambda s: tuple(s.sort(dim=0)))
    # column 1 sorted: -0.5 (row 2), 0.9 (row 0), 3.0 (row 1): no near-tie; column 0 and 2
    # hold none either; column 3 neither. Along dim 0 no two scores are near: nothing kept
    assert ties is None and order.shape == SCORES.shape
    (_, order), ties = _recorded(lambda s: tuple(torch.sort(s.t(), dim=0, stable=True)))
    # columns of the transpose are rows: element (slot, column) is flat slot * 3 + column
    assert {tuple(x) for x in ties[1].tolist()} >= {(2 * 3 + 0, 1), (2 * 3 + 0, 2)}


def test_gate_2_excuses_a_tied_topk_slot_and_refuses_a_far_one() -> None:
    (_, top), ties = _recorded(lambda s: tuple(s.topk(2, dim=1)))
    eager = torch.tensor([[2, 1], [2, 0], [0, 3]])

    def compare(got: list[list[int]]) -> bool:
        return _gate_2_passes(got, eager, top, ties[1])

    assert compare([[1, 2], [1, 2], [0, 3]])
    assert not compare([[1, 3], [0, 1], [0, 3]])  # position 3 of row 0 scores 0.2
    assert not compare([[1, 2], [0, 1], [3, 0]])  # row 2 has no tie: its order is fixed


def test_median_and_kthvalue_keep_the_positions_near_the_score_they_chose() -> None:
    """Row 0's third smallest is one of its near-tied pair, row 1's median and third
    smallest one of its three equal scores; row 2 ties nowhere, and mode is not recorded."""
    (_, kth), ties = _recorded(lambda s: tuple(s.kthvalue(3, dim=1)))
    assert kth[2].item() == 3 and ties[0] is None
    assert ties[1].tolist() == [[0, 1], [0, 2], [1, 0], [1, 1], [1, 2]]
    _, ties = _recorded(lambda s: tuple(torch.median(s, dim=1, keepdim=True)))
    assert ties[1].tolist() == [[1, 0], [1, 1], [1, 2]]
    _, ties = _recorded(lambda s: tuple(s.nanmedian(dim=1)))
    assert ties[1].tolist() == [[1, 0], [1, 1], [1, 2]]
    _, none = _recorded(lambda s: tuple(s.mode(dim=1)))
    assert none is None


def test_gate_2_excuses_a_tied_kthvalue_index_and_refuses_a_far_one() -> None:
    (_, kth), ties = _recorded(lambda s: tuple(s.kthvalue(3, dim=1)))
    eager = torch.tensor([1, 0, 3])

    def compare(got: list[int]) -> bool:
        return _gate_2_passes(got, eager, kth, ties[1])

    assert compare([2, 2, 3]) and compare([1, 1, 3])
    assert not compare([3, 0, 3])  # position 3 of row 0 scores 0.2, not near 0.9
    assert not compare([1, 0, 2])  # row 2 has no tie


def test_a_running_extreme_keeps_only_the_near_positions_up_to_its_own() -> None:
    """cummax at position i chose among 0..i: row 0's near-tie 1, 2 is open to positions
    2 and 3 only, and row 1's three equal scores to each position as it reaches them."""
    (_, running), ties = _recorded(lambda s: tuple(s.cummax(dim=1)))
    assert running[0].tolist() == [0, 1, 1, 1]
    assert ties[1].tolist() == [
        [1, 1],
        *([e, p] for e in (2, 3) for p in (1, 2)),
        [4, 0],
        *([5, p] for p in (0, 1)),
        *([e, p] for e in (6, 7) for p in (0, 1, 2)),
    ]
    eager = running.clone()
    assert _gate_2_passes([[0, 1, 2, 2], [0, 0, 1, 0], [0, 0, 0, 0]], eager, running, ties[1])
    assert not _gate_2_passes([[0, 2, 1, 1], [0, 1, 2, 2], [0, 0, 0, 0]], eager, running, ties[1])


EDGES = torch.tensor([0.0, 1.0, 2.0], dtype=torch.float64)
VALUES = torch.tensor([0.5, 1.0 - 1e-6, 1.9995, 3.0, -1e-4], dtype=torch.float64)


def test_a_bin_number_keeps_every_bin_a_value_within_tolerance_would_fall_in() -> None:
    """Values near an edge (elements 1, 2 and 4) may fall on either side; the others have
    one bin.  searchsorted with ``right`` reads its side back from the bin it gave."""
    _, ties = _recorded(
        lambda v: (
            torch.bucketize(v, EDGES),
            torch.searchsorted(EDGES, v, right=True),
            torch.searchsorted(EDGES, v, sorter=torch.arange(3)),
        ),
        VALUES,
    )
    near = [[1, 1], [1, 2], [2, 2], [2, 3], [4, 0], [4, 1]]
    assert ties[0].tolist() == near and ties[1].tolist() == near
    assert ties[2] is None  # boundaries in a sorter's order: compared by equality


def test_boundaries_of_their_own_per_row_give_each_rows_values_their_bins() -> None:
    """Inverse-CDF sampling searches each row's cumulative sums: row 1's edges are shifted
    by 0.25, so its values lie inside bins and only row 0 keeps neighbouring bins."""
    edges = torch.stack([EDGES, EDGES + 0.25])
    _, (ties,) = _recorded(lambda v: torch.searchsorted(edges, v), torch.stack([VALUES, VALUES]))
    assert ties.tolist() == [[1, 1], [1, 2], [2, 2], [2, 3], [4, 0], [4, 1]]


def test_gate_2_excuses_a_neighbouring_bin_only_near_its_edge() -> None:
    (bins,), (ties,) = _recorded(lambda v: torch.bucketize(v, EDGES), VALUES)
    eager = torch.tensor([1, 2, 3, 3, 1])

    def compare(got: list[int]) -> bool:
        return _gate_2_passes(got, eager, bins, ties)

    assert compare([1, 2, 2, 3, 0]) and compare([1, 1, 3, 3, 1])
    assert not compare([2, 1, 2, 3, 0])  # 0.5 lies in the middle of bin 1
    assert not compare([1, 1, 2, 3, 2])  # -1e-4 is near edge 0, not edge 1


def test_a_sort_of_tied_scores_keeps_a_bounded_number_of_pairs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A sort's output has an index per score: where they all tie, the pairs kept stop at
    ``MAX_PAIRS`` (later elements are compared by equality) instead of filling memory."""
    import gates.index_ties as index_ties_module

    monkeypatch.setattr(index_ties_module, "MAX_PAIRS", 100)
    monkeypatch.setattr(index_ties_module, "_CHUNK", 7)  # several chunks before the bound
    _, (ties,) = _recorded(lambda s: s.argsort(dim=1), torch.zeros(3, 40, dtype=torch.float64))
    assert ties.shape == (100, 2)
    assert ties[:, 0].max() < 3  # the first elements' pairs, each element's 40 positions
    # bin numbers too: 80 values, each on an edge, keep their first 100 pairs
    on_edges = EDGES[torch.arange(80) % 3]
    _, (ties,) = _recorded(lambda v: torch.bucketize(v, EDGES), on_edges)
    assert ties.shape == (100, 2) and ties[:, 0].max() < 50
