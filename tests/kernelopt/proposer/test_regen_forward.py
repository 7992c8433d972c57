"""The per-call pieces of a regenerated candidate's forward (kernelopt.proposer.regen.forward)."""

from __future__ import annotations

import pytest
import torch

from kernelopt.proposer.regen.code import input_signature, output_form
from kernelopt.proposer.regen.forward import (
    ForwardPlan,
    ShapeCheck,
    argument_reader,
    forward_scope,
    result_builder,
)


def test_the_shape_check_takes_exactly_the_compiled_inputs() -> None:
    x = torch.randn(4, 3)
    check = ShapeCheck(input_signature([x, 2.0]))
    assert check([torch.zeros(4, 3), 7.0])  # a number is not part of the signature
    assert not check([torch.zeros(3, 4), 7.0])  # shape
    assert not check([x.t().contiguous().t(), 7.0])  # stride
    assert not check([x.double(), 7.0])  # dtype
    assert not check([x, torch.tensor(7.0)])  # a tensor where a number was compiled
    assert not check([x])  # arity


@pytest.mark.parametrize(
    "result",
    [
        torch.ones(2),
        (torch.ones(2), torch.zeros(3)),
        [torch.ones(2)],
        {"a": torch.ones(2), "b": (torch.zeros(1), None, 1.5)},
    ],
    ids=["tensor", "tuple", "list", "tree"],
)
def test_the_result_is_rebuilt_in_the_forward_form(result: object) -> None:
    from torch.utils._pytree import tree_leaves

    leaves = tree_leaves(result)
    picks = [("output", i) for i in range(len(leaves))]
    rebuilt = result_builder(picks, output_form(result))(leaves, [])
    assert type(rebuilt) is type(result)
    assert all(a is b for a, b in zip(tree_leaves(rebuilt), leaves, strict=True))


def test_picks_of_inputs_and_items_take_the_general_path() -> None:
    out, arg = torch.tensor(3.0), torch.ones(2)
    build = result_builder([("item", 0), ("input", 0), ("none", 0)], "tuple")
    assert build([out], [arg]) == (3.0, arg, None)


def test_constants_come_back_as_the_values_they_stand_for() -> None:
    out = torch.ones(2)
    picks = [("output", 0), ("constant", 0), ("constant", 1), ("constant", 2)]
    constants = [("literal", "'activations'"), ("dtype", "float16"), ("float", "nan")]
    got = result_builder(picks, "tuple", constants)([out], [])
    assert got[:3] == (out, "activations", torch.float16) and got[3] != got[3]  # nan
    # a plan keeps a layout's constants; one written before constants has two parts
    wrapper = "def call(args):\n    (x,) = args\n    args.clear()\n    return (x + 1,)\n"
    plan = ForwardPlan(
        wrapper, ["L['x']"], ([("output", 0), ("constant", 0)], {}, constants), [None], "tuple"
    )
    args, outs = plan.run({"x": torch.zeros(2)})
    assert plan.results(outs, args)[1] == "activations"
    old = ForwardPlan(wrapper, ["L['x']"], ([("output", 0)], {}), [None], "tensor")
    assert old.results(*reversed(old.run({"x": torch.zeros(2)}))).tolist() == [1.0, 1.0]


def test_a_plan_reads_every_argument_in_one_expression_and_keeps_them() -> None:
    wrapper = "def call(args):\n    a, b = args\n    args.clear()\n    return (a + b,)\n"
    plan = ForwardPlan(wrapper, ["L['x']", "L['self'].w"], ([("output", 0)], {}), [None], "tensor")

    class Holder:
        w = torch.ones(2)

    args, out = plan.run({"x": torch.full((2,), 2.0), "self": Holder()})
    assert len(args) == 2  # the wrapper emptied its own list, not the plan's
    assert plan.results(out, args).tolist() == [3.0, 3.0]


def test_the_scope_names_the_inputs_and_the_wrapper_dynamo_traces_for_torchs_own_forward() -> None:
    model, x = object(), torch.ones(2)
    read = argument_reader(["L['self']", "L['x']", "L['fn']", "L['args'][0]"])
    assert read(forward_scope(model, ["x"], [x])) == [model, x, model, x]
    # a forward input named like the wrapper's locals is that input
    assert forward_scope(model, ["args"], [x])["args"] is x
