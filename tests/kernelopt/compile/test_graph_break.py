"""A Dynamo refusal said in one line: what broke, why, and where in the user's code."""

from __future__ import annotations

import pytest
import torch
import torch.nn as nn

from kernelopt.compile.capture import CaptureError, capture
from kernelopt.compile.graph_break import one_line

MESSAGE = """Failed to trace builtin operator
  Explanation: Dynamo does not know how to trace builtin operator `print`
  Hint: Avoid calling builtin `print`.

from user code:
   File "/tmp/x/model.py", line 30, in forward
    return self.block(x)
   File "/tmp/store/problems/problem_15c0920129b5c5fc.py", line 9, in block
    print("shape", tuple(x.shape))

Set TORCHDYNAMO_VERBOSE=1 for the internal stack trace"""


def test_the_cause_and_the_innermost_user_line_join_the_first_line() -> None:
    assert one_line(MESSAGE) == (
        "Failed to trace builtin operator; Dynamo does not know how to trace builtin "
        "operator `print`; at line 9 of the problem file, in block: "
        'print("shape", tuple(x.shape))'
    )


def test_a_message_without_them_keeps_its_first_line() -> None:
    assert one_line("Data-dependent branching\n  more") == "Data-dependent branching"
    assert one_line("") == ""
    helper = 'x\nfrom user code:\n   File "/a/helpers.py", line 4, in f\n'
    assert one_line(helper) == "x; at line 4 of helpers.py, in f"


class _Printing(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        print("forward got", tuple(x.shape))
        return x.relu()


def test_a_capture_error_names_the_line_that_broke_the_graph_on_its_first_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    torch._dynamo.reset()
    with pytest.raises(CaptureError) as caught:
        capture(_Printing(), [torch.randn(4, 4)], "default")
    first = str(caught.value).splitlines()[0]
    assert first.startswith("the forward does not compile as one graph: ")
    assert "print" in first and "of test_graph_break.py, in forward: print(" in first
