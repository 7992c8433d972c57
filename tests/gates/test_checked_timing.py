"""Checked timing in pieces: rotating inputs, plain outputs, and the parent's comparison."""

from __future__ import annotations

from pathlib import Path

import torch

from gates.checked_calls import CheckedCalls, RotatingInputs, output_problem, shares_memory
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


def _record(tmp_path: Path, answer) -> Path:
    """Three sets, 30 calls, each answered by ``answer(set_index, call_index, x)``."""
    sets = _sets()
    rotation = RotatingInputs(sets)
    checks = CheckedCalls(expected=SPEC, device="cpu", samples=16)
    for i in range(30):
        k, args = rotation.next()
        checks.record(answer(k, i, args[0]), k, args)
    path = tmp_path / "checks.pt"
    checks.save(path)
    return path


def _refs() -> dict[str, list[torch.Tensor]]:
    return {f"s{k}": [torch.full((4, 8), float(k)) * 2 + 1] for k in range(3)}


def _check(path: Path):
    return check_timed_calls(
        path, ["s0", "s1", "s2"], _refs(), rtol=1e-3, atol=1e-3, scale_tol=2e-3
    )


def test_honest_calls_pass_and_every_call_is_counted(tmp_path: Path) -> None:
    result = _check(_record(tmp_path, lambda k, i, x: x * 2 + 1))
    assert result.ok, result.reason
    assert result.calls == 30 and result.samples == 30 * 16 and result.whole_outputs == 2


def test_a_late_wrong_call_is_named(tmp_path: Path) -> None:
    result = _check(_record(tmp_path, lambda k, i, x: x * 2 + 1 if i < 25 else x * 0))
    assert not result.ok and result.call_index == 25
    assert "timed call #25" in result.reason


def test_an_error_in_one_element_is_caught_by_the_kept_whole_outputs(tmp_path: Path) -> None:
    def one_wrong(k: int, i: int, x: torch.Tensor) -> torch.Tensor:
        out = x * 2 + 1
        out[3, 7] += 1.0  # 1 of 32 elements: the samples may miss it, a whole output cannot
        return out

    result = _check(_record(tmp_path, one_wrong))
    assert not result.ok and "timed call #" in result.reason


def test_a_stale_answer_from_another_set_fails(tmp_path: Path) -> None:
    cache: dict[int, torch.Tensor] = {}

    def pointer_memo(k: int, i: int, x: torch.Tensor) -> torch.Tensor:
        return cache.setdefault(x.data_ptr(), x * 2 + 1)

    assert not _check(_record(tmp_path, pointer_memo)).ok


def test_a_missing_checks_file_is_a_failure_not_a_pass(tmp_path: Path) -> None:
    result = _check(tmp_path / "absent.pt")
    assert not result.ok and "missing" in result.reason


def test_cpu_timing_is_skipped_with_a_reason_when_calls_take_seconds() -> None:
    from gates.cascade import _too_slow_for_cpu_timing
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
    assert _too_slow_for_cpu_timing(result(0.2), cpu) == ""
    assert "12.0 s" in _too_slow_for_cpu_timing(result(12.0), cpu)
    assert _too_slow_for_cpu_timing(result(12.0), GateSettings(device="cuda")) == ""


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
