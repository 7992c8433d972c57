"""Where a forward's results and stored state sit among a compiled graph's outputs."""

from __future__ import annotations

import torch
import torch.nn as nn

from kernelopt.compile.output_layout import (
    FirstCall,
    constant_value,
    output_layout,
    picked,
    write_back,
)


class _Holder(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("avg", torch.zeros(3))
        self.register_buffer("calls", torch.zeros(()))


def _first(args: list[torch.Tensor], outputs: tuple[torch.Tensor, ...]) -> FirstCall:
    first = FirstCall()
    first.wrap(lambda *a: outputs)(*args)
    return first


def test_the_first_call_is_kept_and_later_ones_are_not() -> None:
    first = FirstCall()
    call = first.wrap(lambda x: (x * 2,))
    a, b = torch.ones(2), torch.zeros(2)
    call(a)
    call(b)
    assert first.args is not None and first.args[0] is a
    assert first.outputs is not None and torch.equal(first.outputs[0], a * 2)


def test_a_stored_tensor_is_state_and_not_a_result() -> None:
    model = _Holder()
    x = torch.ones(3)
    result, stored = x * 2, torch.tensor([1.0, 2.0, 3.0])
    model.avg = stored  # what Dynamo does after the graph ran
    layout = output_layout(_first([model.calls, x], (result, stored)), [result], model)
    assert layout.picks == [("output", 0)]
    assert layout.state_outputs == {1: "avg"}


def test_a_result_returned_twice_and_a_returned_argument_are_picked() -> None:
    model = _Holder()
    x = torch.ones(3)
    y = x.exp()
    layout = output_layout(_first([model.avg, x], (y,)), [y, y, model.avg], model)
    assert layout.picks == [("output", 0), ("output", 0), ("input", 0)]
    assert picked((y,), [model.avg, x], layout.picks) == (y, y, model.avg)


def test_constants_the_graph_never_returns_are_kept_as_text_and_read_back() -> None:
    """A string, a dtype, a device and numbers no output holds (a shape's sizes, a NaN)
    come back from the layout, not by position."""
    model = _Holder()
    y = torch.ones(3)
    leaves = [y, "label", torch.float16, torch.device("cpu"), 3, float("nan"), True]
    layout = output_layout(_first([], (y,)), leaves, model)
    assert layout.picks == [("output", 0), *(("constant", i) for i in range(6))]
    values = [constant_value(c) for c in layout.constants]
    got = picked((y,), [], layout.picks, values)
    assert got[:5] == (y, "label", torch.float16, torch.device("cpu"), 3)
    assert got[5] != got[5] and got[6] is True


def test_a_none_and_a_number_read_from_an_output_are_picked() -> None:
    model = _Holder()
    total, y = torch.tensor(6.0), torch.ones(3)
    layout = output_layout(_first([], (y, total)), [y, None, 6.0], model)
    assert layout.picks == [("output", 0), ("none", 0), ("item", 1)]
    assert picked((y, total), [], layout.picks) == (y, None, 6.0)


def test_a_result_found_nowhere_makes_the_layout_positional_without_state() -> None:
    model = _Holder()
    total, stored = torch.tensor(6.0), torch.zeros(())
    model.calls = stored
    elsewhere = torch.ones(2)  # a tensor neither an output nor an argument
    layout = output_layout(_first([], (total, stored)), [elsewhere], model)
    assert layout.picks == [("output", 0)]
    assert layout.state_outputs == {1: "calls"}


def test_write_back_copies_into_the_captured_entry_and_skips_itself() -> None:
    entry, same = torch.zeros(3), torch.ones(2)
    outputs = (torch.ones(1), torch.tensor([4.0, 5.0, 6.0]), same)
    write_back(outputs, {1: "avg", 2: "same"}, {"avg": entry, "same": same})
    assert entry.tolist() == [4.0, 5.0, 6.0]
    assert same.tolist() == [1.0, 1.0]
    assert picked(outputs, [], None) == outputs
