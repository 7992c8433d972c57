"""Checked timing in pieces: rotating inputs, plain outputs, and the parent's comparison."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from gates.checked_calls import CheckedCalls, RotatingInputs, output_problem, shares_memory
from gates.jobs.timing import cpu_threads
from gates.protocol import OutputLeaf
from gates.timed_checks import check_timed_calls

SPEC = [OutputLeaf(shape=[4, 8], dtype="float32")]


def _sets(n: int = 3) -> list[list[torch.Tensor]]:
    return [[torch.full((4, 8), float(k))] for k in range(n)]


def test_every_call_gets_new_values_in_one_of_two_buffers() -> None:
    rotation = RotatingInputs(_sets())
    pointers, versions = set(), []
    previous_value = {}
    for turn in range(40):
        k, (x,) = rotation.next()
        slot = turn % 2
        assert float(x[0, 0]) == k  # the buffer holds the set it says
        assert previous_value.get(slot) != k  # a copy always changes the values
        previous_value[slot] = k
        pointers.add(x.data_ptr())
        versions.append(x._version)
    assert len(pointers) == 2
    assert versions[2] > versions[0]  # a memo keyed on the version counter misses


class _Sub(torch.Tensor):
    pass


def test_outputs_must_be_plain_fresh_tensors_of_the_reference_shape() -> None:
    x = torch.randn(4, 8)
    assert output_problem(x * 2, SPEC, "cpu", [x]) == ""
    assert "not a plain torch.Tensor" in output_problem((x * 2).as_subclass(_Sub), SPEC, "cpu", [x])
    assert "shares memory" in output_problem(x, SPEC, "cpu", [x])
    assert "shares memory" in output_problem(x.view(4, 8)[:, :], SPEC, "cpu", [x])
    assert (
        output_problem(x, [OutputLeaf(shape=[4, 8], dtype="float32", may_alias=True)], "cpu", [x])
        == ""
    )
    assert "shape" in output_problem(torch.randn(8, 4), SPEC, "cpu", [x])
    assert "dtype" in output_problem(torch.randn(4, 8).double(), SPEC, "cpu", [x])
    assert "leaves" in output_problem((x * 2, x * 3), SPEC, "cpu", [x])
    assert not shares_memory(torch.empty(0), [x])


# how the calls are recorded: one by one (record), or in batches of 7 (record_batch, as
# host batches and turns do; 30 calls end on a short batch)
BATCHES = [0, 7]


def _record(tmp_path: Path, answer, batch: int = 0) -> Path:
    """Three sets, 30 calls, each answered by ``answer(set_index, call_index, x)``."""
    sets = _sets()
    rotation = RotatingInputs(sets)
    checks = CheckedCalls(expected=SPEC, device="cpu", samples=16)
    pending = []
    for i in range(30):
        k, args = rotation.next()
        out = answer(k, i, args[0])
        if not batch:
            checks.record(out, k, args)
            continue
        pending.append((out, k, args))
        if len(pending) == batch or i == 29:
            checks.record_batch(pending)
            pending = []
    path = tmp_path / "checks.pt"
    checks.save(path)
    return path


def _refs() -> dict[str, list[torch.Tensor]]:
    return {f"s{k}": [torch.full((4, 8), float(k)) * 2 + 1] for k in range(3)}


def _check(path: Path):
    return check_timed_calls(
        path, ["s0", "s1", "s2"], _refs(), rtol=1e-3, atol=1e-3, scale_tol=2e-3
    )


@pytest.mark.parametrize("batch", BATCHES)
def test_honest_calls_pass_and_every_call_is_counted(tmp_path: Path, batch: int) -> None:
    result = _check(_record(tmp_path, lambda k, i, x: x * 2 + 1, batch))
    assert result.ok, result.reason
    assert result.calls == 30 and result.samples == 30 * 16 and result.whole_outputs == 2


@pytest.mark.parametrize("batch", BATCHES)
def test_a_late_wrong_call_is_named(tmp_path: Path, batch: int) -> None:
    result = _check(_record(tmp_path, lambda k, i, x: x * 2 + 1 if i < 25 else x * 0, batch))
    assert not result.ok and result.call_index == 25
    assert "timed call #25" in result.reason


@pytest.mark.parametrize("batch", BATCHES)
def test_an_error_in_one_element_is_caught_by_the_kept_whole_outputs(
    tmp_path: Path, batch: int
) -> None:
    def one_wrong(k: int, i: int, x: torch.Tensor) -> torch.Tensor:
        out = x * 2 + 1
        out[3, 7] += 1.0  # 1 of 32 elements: the samples may miss it, a whole output cannot
        return out

    result = _check(_record(tmp_path, one_wrong, batch))
    assert not result.ok and "timed call #" in result.reason


@pytest.mark.parametrize("batch", BATCHES)
def test_a_stale_answer_from_another_set_fails(tmp_path: Path, batch: int) -> None:
    cache: dict[int, torch.Tensor] = {}

    def pointer_memo(k: int, i: int, x: torch.Tensor) -> torch.Tensor:
        return cache.setdefault(x.data_ptr(), x * 2 + 1)

    assert not _check(_record(tmp_path, pointer_memo, batch)).ok


def test_a_missing_checks_file_is_a_failure_not_a_pass(tmp_path: Path) -> None:
    result = _check(tmp_path / "absent.pt")
    assert not result.ok and "missing" in result.reason


def test_cpu_timing_is_skipped_with_a_reason_when_calls_take_seconds() -> None:
    from gates.cascade import too_slow_for_cpu_timing
    from kernelopt.contracts.verdicts import (
        CascadeResult,
        GateName,
        GateSettings,
        GateStatus,
        GateVerdict,
    )

    def result(seconds: float) -> CascadeResult:
        gate2 = GateVerdict(
            gate=GateName.CORRECTNESS,
            status=GateStatus.PASS,
            reason="ok",
            metrics={"calls": [{"seconds": 0.1}, {"seconds": seconds}]},
        )
        return CascadeResult(problem="p", candidate="c", verdicts=[gate2], accepted=True)

    cpu = GateSettings(device="cpu")
    assert too_slow_for_cpu_timing(result(0.2), cpu) == ""
    assert "12.0 s" in too_slow_for_cpu_timing(result(12.0), cpu)
    assert too_slow_for_cpu_timing(result(12.0), GateSettings(device="cuda")) == ""


def test_a_cpu_timing_child_runs_torch_on_one_thread() -> None:
    """A loaded CPU stalls an OpenMP region's barrier for whole stretches of calls."""
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        cpu_threads("cuda:0")  # a GPU child's host work is left as torch set it
        assert torch.get_num_threads() == 2
        cpu_threads("cpu")
        assert torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(before)


def test_an_output_must_be_on_the_device_the_reference_put_it() -> None:
    x = torch.randn(4, 8)
    off = torch.empty(4, 8, device="meta")
    assert "is on meta" in output_problem(off, SPEC, "cpu", [x])
    on_meta = [OutputLeaf(shape=[4, 8], dtype="float32", device="meta")]
    assert output_problem(off, on_meta, "cpu", [x]) == ""  # the reference returned it there
    assert "is on cpu" in output_problem(x * 2, on_meta, "cpu", [x])


def test_host_batches_give_every_call_new_values_so_no_memo_can_hit() -> None:
    """The host batch calls like the checked loop: a (pointer, version) memo never hits."""
    from gates.jobs.timing import CheckedLoop
    from gates.timers import TimerKit

    seen: dict[tuple[int, int], float] = {}
    last_value: dict[int, float] = {}
    hits = 0

    def memo_forward(x: torch.Tensor) -> torch.Tensor:
        nonlocal hits
        key = (x.data_ptr(), x._version)
        hits += key in seen
        seen[key] = float(x[0, 0])
        assert last_value.get(x.data_ptr()) != float(x[0, 0]), "a buffer was reused unchanged"
        last_value[x.data_ptr()] = float(x[0, 0])
        return x * 2

    checks = CheckedCalls(expected=SPEC, device="cpu", samples=4)
    loop = CheckedLoop(TimerKit("cpu"), memo_forward, RotatingInputs(_sets()), checks)
    ms = loop.host_batch(25)
    assert hits == 0 and len(seen) == 25
    assert checks.calls == 25 and ms >= 0.0


def test_first_sight_sets_come_from_outside_the_rotation_once_each_checked() -> None:
    """What a memo of earlier inputs cannot answer: values the side has not been given,
    loaded only after the samples, into the same buffers and checked like every call."""
    from gates.jobs.timing import CheckedLoop
    from gates.timers import TimerKit

    given: list[int] = []
    buffers: set[int] = set()

    def forward(x: torch.Tensor) -> torch.Tensor:
        given.append(int(x[0, 0]))
        buffers.add(x.data_ptr())
        return x * 2

    checks = CheckedCalls(expected=SPEC, device="cpu", samples=4)
    sets = _sets(5)
    rotation = RotatingInputs(sets[:3])
    loop = CheckedLoop(TimerKit("cpu"), forward, rotation, checks)
    loop.untimed(30)
    loop.timed(10)
    assert set(given) == {0, 1, 2}  # warm-up and samples rotate over their own sets
    rotated = set(buffers)
    given.clear()
    samples = loop.first_sight(sets[3:], first_index=3)
    assert len(samples) == 2 and given == [3, 4]  # each once
    assert buffers == rotated  # the same buffers: a pointer says nothing
    assert checks.calls == 42 and checks.sets[-2:] == [3, 4]  # checked, numbered after
    with pytest.raises(ValueError, match="must rotate"):
        RotatingInputs([])


def test_each_host_batch_keeps_its_copies_and_raw_time_for_the_record() -> None:
    """What a batch took off (its copies) is kept beside its raw time: a noisy host reading
    can then be told apart as the model's or the subtraction's."""
    from gates.jobs.timing import CheckedLoop
    from gates.timers import TimerKit

    checks = CheckedCalls(expected=SPEC, device="cpu", samples=4)
    loop = CheckedLoop(TimerKit("cpu"), lambda x: x * 2, RotatingInputs(_sets()), checks)
    readings = [loop.host_batch(10) for _ in range(3)]
    assert len(loop.batches) == 3
    for reading, (copies, raw) in zip(readings, loop.batches, strict=True):
        assert copies >= 0.0 and raw >= 0.0
        assert reading == max(raw - copies, 0.0)  # no dispatch floor without timed calls


# a matrix read through a transpose, integers, a scalar and an empty leaf: every kind of
# leaf a record samples or skips
MIXED = [
    OutputLeaf(shape=[8, 4], dtype="float32"),
    OutputLeaf(shape=[5], dtype="int64"),
    OutputLeaf(shape=None, dtype=None),
    OutputLeaf(shape=[0, 3], dtype="float32"),
]


def _mixed(i: int, x: torch.Tensor) -> tuple:
    return (x.t() * (i + 1), torch.arange(5) * 10 + i, float(i), torch.empty(0, 3))


def _payload(checks: CheckedCalls, tmp_path: Path, name: str) -> dict:
    checks.save(tmp_path / name)
    return torch.load(tmp_path / name, weights_only=True)


@pytest.mark.parametrize("stack_bytes", [64 << 20, 0])  # stacked, and gathered call by call
def test_a_batch_records_what_its_calls_one_by_one_would(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, stack_bytes: int
) -> None:
    """Same payload shapes and validity as ``record``; every value is the output's element at
    its drawn position, across batches, and the kept outputs are copies of those calls."""
    monkeypatch.setattr("gates.checked_calls._STACK_BYTES", stack_bytes)
    x = torch.randn(4, 8)
    outs = [(_mixed(i, x), i % 3, [x]) for i in range(12)]
    single = CheckedCalls(expected=MIXED, device="cpu", samples=16)
    for out in outs:
        single.record(*out)
    batched = CheckedCalls(expected=MIXED, device="cpu", samples=16)
    batched.record_batch(outs[:5])
    batched.record_batch(outs[5:])
    one, many = _payload(single, tmp_path, "one.pt"), _payload(batched, tmp_path, "many.pt")
    assert many["sets"].tolist() == one["sets"].tolist() == [i % 3 for i in range(12)]
    assert many["samples"] == one["samples"] and many["problems"] == one["problems"] == []
    for j in range(len(MIXED)):
        assert many["positions"][j].shape == one["positions"][j].shape == (12, 16)
        assert many["values"][j].dtype == one["values"][j].dtype == torch.float64
        assert many["valid"][j].tolist() == one["valid"][j].tolist() == [j < 2] * 12
    for j in range(2):
        for i, (out, _, _) in enumerate(outs):
            want = out[j].reshape(-1)[many["positions"][j][i]].double()
            assert torch.equal(many["values"][j][i], want)
    assert len(many["kept"]) == batched.reservoir == 2
    for index, k, leaves in many["kept"]:
        assert k == index % 3 and torch.equal(leaves[0], outs[index][0][0])
        assert leaves[0].data_ptr() != outs[index][0][0].data_ptr()  # a copy, not the output


class _Cycle:
    """Rotation without os.urandom: only the records' draws reach the patched one."""

    def __init__(self) -> None:
        self.sets, self.turns = _sets(), 0

    def next(self) -> tuple[int, list[torch.Tensor]]:
        k = self.turns % 3
        self.turns += 1
        return k, self.sets[k]


def test_a_batch_draws_its_positions_only_after_its_last_call(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Host batches and turns: no draw between or before their calls, and the positions come
    from the draws made after them."""
    from gates.jobs.timing import CheckedLoop
    from gates.timers import TimerKit

    events: list[str] = []

    def urandom(n: int) -> bytes:
        events.append("draw")
        return bytes(range(1, n + 1))  # the same draws every batch

    def forward(x: torch.Tensor) -> torch.Tensor:
        events.append("call")
        return x * 2

    monkeypatch.setattr("gates.checked_calls._urandom", urandom)
    checks = CheckedCalls(expected=SPEC, device="cpu", samples=4)
    loop = CheckedLoop(TimerKit("cpu"), forward, _Cycle(), checks)
    loop.host_batch(6)
    loop.turn(6, synced=lambda: events.append("synced"))
    calls = [i for i, e in enumerate(events) if e == "call"]
    draws = [i for i, e in enumerate(events) if e == "draw"]
    assert len(calls) == 12 and draws
    first_batch, second_batch = calls[5], calls[11]
    assert all(first_batch < d < calls[6] or d > second_batch for d in draws)
    assert events.index("synced") < min(d for d in draws if d > second_batch)
    rows = _payload(checks, tmp_path, "checks.pt")["positions"][0]
    assert torch.equal(rows[:6], rows[6:])  # the same draws: the same positions


def test_a_bad_output_in_the_middle_of_a_batch_is_that_call_s_problem(tmp_path: Path) -> None:
    """Its leaves are skipped for that call only; the calls around it are sampled and right."""
    rotation = RotatingInputs(_sets())
    checks = CheckedCalls(expected=SPEC, device="cpu", samples=16)
    for _ in range(3):  # calls before the batch: the problem's index counts them
        k, args = rotation.next()
        checks.record(args[0] * 2 + 1, k, args)
    batch = []
    for i in range(9):
        k, args = rotation.next()
        out = args[0] * 2 + 1
        batch.append((out.t() if i == 4 else out, k, args))
    checks.record_batch(batch)
    assert [i for i, _ in checks.problems] == [7] and "shape" in checks.problems[0][1]
    payload = _payload(checks, tmp_path, "checks.pt")
    assert payload["valid"][0].tolist() == [i != 7 for i in range(12)]
    assert torch.isnan(payload["values"][0][7]).all()
    assert not torch.isnan(payload["values"][0][[6, 8]]).any()
    result = _check(tmp_path / "checks.pt")
    assert not result.ok and result.call_index == 7 and "timed call #7" in result.reason


def test_every_call_of_every_batch_is_as_likely_to_be_kept_whole(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Reservoir of 2 over two batches of 5: each of the 10 calls kept about 1 time in 5
    (seeded draws, so the count is fixed and the bounds are wide)."""
    import random

    draws = random.Random(7)
    monkeypatch.setattr("gates.checked_calls._urandom", draws.randbytes)
    spec = [OutputLeaf(shape=[1], dtype="float32")]
    counts = [0] * 10
    trials = 1500
    for _ in range(trials):
        checks = CheckedCalls(expected=spec, device="cpu", samples=1, reservoir=2)
        for start in (0, 5):
            checks.record_batch(
                [(torch.tensor([float(i)]), 0, []) for i in range(start, start + 5)]
            )
        for index, _, leaves in checks.kept:
            assert float(leaves[0]) == index
            counts[index] += 1
    assert sum(counts) == 2 * trials
    assert all(abs(c - trials / 5) < 0.15 * trials / 5 for c in counts), counts


def test_the_records_see_the_leaves_tree_flatten_sees() -> None:
    """The records' shortcut for plain tensors, tuples and lists is ``tree_flatten``'s walk."""
    from collections import namedtuple

    from torch.utils._pytree import tree_flatten

    from gates.checked_calls import _leaves

    x, y = torch.ones(2), torch.zeros(3)
    pair = namedtuple("pair", "a b")
    outs = [x, (x, y), [y], (), (x, None), (x, (y,)), {"a": x}, pair(x, y), torch.nn.Parameter(x)]
    outs.append((x.as_subclass(_Sub), y))
    for out in outs:
        got, want = _leaves(out), tree_flatten(out)[0]
        assert len(got) == len(want) and all(a is b for a, b in zip(got, want, strict=True))


@pytest.mark.parametrize("batch", ["host_batch", "turn"])
def test_a_batch_holds_outputs_that_alias_their_inputs_until_its_records(
    tmp_path: Path, batch: str
) -> None:
    """A forward that returns its input changed in place (as the reference does) is checked
    on what each call returned: the batch's later copies into the same two buffers would
    otherwise show another call's values (on the H200 the identity of such a problem was
    rejected as "a timed call was wrong")."""
    from gates.jobs.timing import CheckedLoop
    from gates.timers import TimerKit

    spec = [OutputLeaf(shape=[4, 8], dtype="float32", may_alias=True)]
    checks = CheckedCalls(expected=spec, device="cpu", samples=16)
    loop = CheckedLoop(
        TimerKit("cpu"), lambda x: x.mul_(2).add_(1), RotatingInputs(_sets()), checks
    )
    getattr(loop, batch)(12)
    assert checks.calls == 12
    path = tmp_path / "checks.pt"
    checks.save(path)
    result = _check(path)
    assert result.ok, result.reason


def test_a_batch_holds_at_most_its_bound_of_outputs() -> None:
    """The calls of a host batch or turn are capped by the bytes of outputs it may hold
    (32 MiB a call and 4 GiB: 128), never below one."""
    from gates.checked_calls import held_calls, output_bytes
    from gates.timers import calls_for

    big = [OutputLeaf(shape=[4096, 2048], dtype="float32"), OutputLeaf(shape=None, dtype=None)]
    assert output_bytes(big) == 32 << 20
    assert held_calls(big, 4 << 30) == 128
    assert calls_for(0.02, 20.0, held_calls(big, 4 << 30)) == 128  # 1,000 without the bound
    assert calls_for(0.02, 20.0) == 1000
    assert calls_for(5.0, 20.0, held_calls(big, 4 << 30)) == 4  # the time decides
    assert calls_for(0.02, 20.0, held_calls(big, 1 << 20)) == 1  # one call's outputs
