"""Which wrapper outputs are the forward's, and which carry state it stores on its module."""

from __future__ import annotations

import torch
import torch.nn as nn

from kernelopt.compile.output_layout import output_layout, write_back


class _Holder(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("avg", torch.zeros(3))
        self.register_buffer("calls", torch.zeros(()))


def test_an_argument_updated_in_place_is_dropped_without_a_write_back() -> None:
    calls = torch.zeros(())
    x = torch.ones(3)
    outputs = (x * 2, calls)
    layout = output_layout(outputs, (x * 2,), [calls, x], ["buffer:calls", "input:0"], _Holder())
    assert layout.model_outputs == 1
    assert layout.state_outputs == {}


def test_a_rebound_buffer_is_matched_to_its_entry_by_value() -> None:
    model = _Holder()
    before = model.avg
    model.avg = torch.tensor([1.0, 2.0, 3.0])  # what the forward stored
    outputs = (torch.ones(3), torch.tensor([1.0, 2.0, 3.0]))
    layout = output_layout(outputs, outputs[:1], [before], ["buffer:avg"], model)
    assert layout.state_outputs == {1: "avg"}


def test_an_extra_output_matching_no_entry_is_left_unmapped() -> None:
    model = _Holder()
    outputs = (torch.ones(3), torch.full((3,), 7.0))
    layout = output_layout(outputs, outputs[:1], [model.avg.clone()], ["buffer:avg"], model)
    assert layout == type(layout)(model_outputs=1, state_outputs={})


def test_write_back_copies_into_the_captured_entry() -> None:
    entry = torch.zeros(3)
    write_back((torch.ones(1), torch.tensor([4.0, 5.0, 6.0])), {1: "avg"}, {"avg": entry})
    assert entry.tolist() == [4.0, 5.0, 6.0]
