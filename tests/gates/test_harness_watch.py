"""The checker's own code is watched in the process that runs the candidate beside it."""

from __future__ import annotations

import torch

import gates.checked_calls as checked_calls
import gates.jobs.candidate as candidate_job
from gates.harness_watch import HarnessWatch, RecordGuard
from gates.timers import TimerKit


def test_a_replaced_method_or_function_is_named_and_put_back() -> None:
    watch = HarnessWatch()
    record, same = checked_calls.CheckedCalls.record, candidate_job.same_values
    try:
        checked_calls.CheckedCalls.record = lambda *a: None  # type: ignore[method-assign]
        candidate_job.same_values = lambda a, b: True
        assert set(watch.tampered()) == {
            "gates.checked_calls.CheckedCalls.record",
            "gates.jobs.candidate.same_values",
        }
        watch.restore()
        assert watch.tampered() == []
        assert checked_calls.CheckedCalls.record is record
        assert candidate_job.same_values is same
    finally:
        checked_calls.CheckedCalls.record, candidate_job.same_values = record, same


def _swap_in_place(function: object, attribute: str, swapped: object) -> set[str]:
    """What the watch names once ``function``'s ``attribute`` is swapped in place (the function
    object itself stays where it is), after checking that ``restore`` puts it back."""
    watch = HarnessWatch()
    original = getattr(function, attribute)
    try:
        setattr(function, attribute, swapped)
        named = set(watch.tampered())
        watch.restore()
        assert getattr(function, attribute) is original and watch.tampered() == []
        return named
    finally:
        setattr(function, attribute, original)


def test_a_function_whose_code_is_swapped_in_place_is_named_and_put_back() -> None:
    swapped = (lambda a, b: True).__code__
    named = _swap_in_place(candidate_job.same_values, "__code__", swapped)
    # one function, watched where it is defined and used
    assert {"kernelopt.kinds.validate.same_values", "gates.jobs.candidate.same_values"} <= named
    assert all(label.endswith(".same_values") for label in named)


def test_a_function_whose_defaults_are_swapped_is_named_and_put_back() -> None:
    init = checked_calls.CheckedCalls.__init__
    zeros = tuple(0 for _ in init.__defaults__ or ())  # no reservoir, no samples
    assert "gates.checked_calls.CheckedCalls.__init__" in _swap_in_place(
        init, "__defaults__", zeros
    )


def test_tensor_methods_are_watched_and_additions_and_data_are_not() -> None:
    watch = HarnessWatch()
    clone = torch.Tensor.clone
    try:
        torch.Tensor.clone = lambda self: self  # type: ignore[method-assign]
        assert watch.tampered() == ["torch.Tensor.clone"]
    finally:
        torch.Tensor.clone = clone  # type: ignore[method-assign]
    checked_calls.added_by_someone = lambda: None  # type: ignore[attr-defined]
    try:
        assert watch.tampered() == []
    finally:
        del checked_calls.added_by_someone  # type: ignore[attr-defined]


def test_the_timer_kit_reports_the_harness_too() -> None:
    kit = TimerKit("cpu")
    record = checked_calls.CheckedCalls.record
    try:
        checked_calls.CheckedCalls.record = lambda *a: None  # type: ignore[method-assign]
        assert "gates.checked_calls.CheckedCalls.record" in kit.tampered()
        kit.restore()
        assert checked_calls.CheckedCalls.record is record and kit.tampered() == []
    finally:
        checked_calls.CheckedCalls.record = record  # type: ignore[method-assign]


def test_a_method_hidden_behind_an_instance_entry_is_named_and_removed() -> None:
    kit = TimerKit("cpu")
    checks = checked_calls.CheckedCalls(expected=[], device="cpu")
    checks.record = lambda *a: None  # type: ignore[method-assign]
    checks.prepare = lambda k: None  # a field of its own: not a method hidden
    hidden = ["gates.checked_calls.CheckedCalls.record (on the instance)"]
    assert kit.tampered(checks) == hidden
    assert kit.records.tampered(checks) == hidden  # the quick look between calls too
    kit.restore(checks)
    assert "record" not in vars(checks) and kit.tampered(checks) == []
    assert kit.records.tampered(checks) == []


def test_the_record_guard_sees_a_shadowed_inherited_method_and_a_swapped_code_object() -> None:
    """Its quick look must see what the full watch sees: an entry put on ``torch.Tensor``
    over a method it inherits, and a recorder function whose code was swapped in place."""
    guard = RecordGuard(["gates.checked_calls"])
    assert guard.tampered() == []
    assert "to" not in vars(torch.Tensor)  # inherited from the C base class
    record = checked_calls.CheckedCalls.record
    code = record.__code__
    try:
        torch.Tensor.to = lambda self, *a, **k: self  # type: ignore[method-assign]
        assert guard.tampered() == ["torch.Tensor.to"]
        guard.restore()
        assert guard.tampered() == [] and "to" not in vars(torch.Tensor)
        record.__code__ = (lambda self, out, set_index, inputs: None).__code__
        assert guard.tampered() == ["gates.checked_calls.CheckedCalls.record"]
        guard.restore()
        assert record.__code__ is code and guard.tampered() == []
    finally:
        record.__code__ = code
        if "to" in vars(torch.Tensor):
            delattr(torch.Tensor, "to")


def test_the_record_guard_sees_a_module_function_replaced_and_defaults_swapped() -> None:
    """The quick look checks each watched entry in the dict it was found in, and every
    watched function's code and defaults: a replaced module-level function of the record
    path and a function whose defaults were swapped in place are both named."""
    guard = RecordGuard(["gates.checked_calls"])
    problem, span = checked_calls.leaves_problem, checked_calls.held_calls
    defaults = span.__defaults__
    try:
        checked_calls.leaves_problem = lambda *a, **k: ""
        assert guard.tampered() == ["gates.checked_calls.leaves_problem"]
        guard.restore()
        assert checked_calls.leaves_problem is problem and guard.tampered() == []
        span.__defaults__ = (1,)
        assert guard.tampered() == ["gates.checked_calls.held_calls"]
        guard.restore()
        assert span.__defaults__ is defaults and guard.tampered() == []
    finally:
        checked_calls.leaves_problem = problem
        span.__defaults__ = defaults


def test_a_dispatch_mode_or_key_left_on_after_the_candidates_code_is_named() -> None:
    """A mode left on torch's stack sees the harness's every later op, its reads of an
    output included: an unwritten output could be computed there, off the clock."""
    from torch.overrides import TorchFunctionMode
    from torch.utils._python_dispatch import TorchDispatchMode

    from gates.harness_watch import DISPATCH_LABEL

    class Passing(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
            return func(*args, **(kwargs or {}))

    watch = HarnessWatch()
    guard = RecordGuard(["gates.checked_calls"])
    with Passing():  # inside the harness's own context: as it was
        pass
    with torch.no_grad():  # grad mode is not part of it
        assert watch.tampered() == [] and guard.tampered() == []
    torch._C._push_on_torch_dispatch_stack(Passing())
    try:
        assert DISPATCH_LABEL in watch.tampered() and DISPATCH_LABEL in guard.tampered()
        watch.restore()
        assert torch._C._len_torch_dispatch_stack() == 0 and watch.tampered() == []
    finally:
        while torch._C._len_torch_dispatch_stack():
            torch._C._pop_torch_dispatch_stack(None)
    torch._C._push_on_torch_function_stack(TorchFunctionMode())  # the other stack alike
    try:
        assert watch.tampered() == [DISPATCH_LABEL]
        watch.restore()
        assert torch._C._len_torch_function_stack() == 0 and watch.tampered() == []
    finally:
        while torch._C._len_torch_function_stack():
            torch._C._pop_torch_function_stack()
    mode = torch.inference_mode()  # a key set left changed: named, not undone
    mode.__enter__()
    try:
        assert watch.tampered() == [DISPATCH_LABEL]
    finally:
        mode.__exit__(None, None, None)
    assert watch.tampered() == []
