"""Algebraic rewrites: each rewritten ModelNew computes what Model does (CPU, float64 check)."""

from __future__ import annotations

import re
import types
from pathlib import Path

import pytest
import torch

from kernelopt.proposer.rewrites.family import rewrite_sources
from kernelopt.proposer.rewrites.graph import RewriteError

HEAD = "import torch\nimport torch.nn as nn\n"
F_IMPORT = "import torch.nn.functional as F\n"


def _problem(
    forward: str, inputs: str, init: str = "", params: str = "x", imports: str = ""
) -> str:
    """A problem file, so each test writes only what its rule looks at: ``Model`` with
    ``init`` (lines after super().__init__()) and a ``forward(self, <params>)`` of
    ``forward`` (lines), and ``get_inputs`` returning ``inputs``; ``imports`` follow HEAD."""
    ctor = f"    def __init__(self):\n        super().__init__()\n{init}" if init else ""
    return (
        HEAD
        + imports
        + (
            f"class Model(nn.Module):\n{ctor}    def forward(self, {params}):\n{forward}"
            f"def get_inputs():\n    return {inputs}\n"
            "def get_init_inputs():\n    return []\n"
        )
    )


def _check(source: str, label: str, rtol: float = 1e-5) -> str:
    found = rewrite_sources(source)
    assert label in found, sorted(found)
    text, _ = found[label]
    ns = types.ModuleType("cand")
    exec(compile(text, "<cand>", "exec"), ns.__dict__)
    torch.manual_seed(0)
    model = ns.Model(*ns.get_init_inputs()).double()
    new = ns.ModelNew(*ns.get_init_inputs()).double()
    new.load_state_dict(model.state_dict())
    inputs = [t.double() for t in ns.get_inputs()]
    torch.testing.assert_close(new(*inputs), model(*inputs), rtol=rtol, atol=1e-9)
    return text


def _checked_model_new(source: str, label: str) -> str:
    """``ModelNew``'s text once ``_check`` passed: what a rule changed is asserted there, since
    the candidate keeps ``Model`` as written."""
    return _check(source, label).split("class ModelNew")[1]


def test_diag_products_become_broadcast_multiplies():
    src = _problem(
        "        return torch.diag(a) @ b + c @ torch.diag(a)\n",
        "[torch.randn(5), torch.randn(5, 5), torch.randn(5, 5)]",
        params="a, b, c",
    )
    assert "torch.diag" not in _checked_model_new(src, "rewrite:diag-broadcast")


def test_batched_diag_embed_and_refusing_diag_of_a_matrix():
    src = _problem(
        "        return torch.matmul(torch.diag_embed(d), x)\n",
        "[torch.randn(3, 6), torch.randn(3, 6, 4)]",
        params="d, x",
    )
    _check(src, "rewrite:diag-broadcast")
    extract = src.replace("torch.diag_embed(d)", "torch.diag(x)").replace(
        "torch.randn(3, 6, 4)", "torch.randn(6, 6)"
    )
    assert "rewrite:diag-broadcast" not in rewrite_sources(extract)  # diag of a matrix: extract


def test_index_is_pushed_before_the_linear_only_when_it_spares_features():
    src = _problem(
        "        return self.head(h)[:, -1]\n",
        "[torch.randn(2, 5, 8)]",
        init="        self.head = nn.Linear(8, 3)\n",
        params="h",
    )
    text = _check(src, "rewrite:slice-before-linear")
    assert re.search(r"getitem\w* = h\[", text)
    features = src.replace("self.head(h)[:, -1]", "self.head(h)[:, :, 0]")
    assert "rewrite:slice-before-linear" not in rewrite_sources(features)


def test_dead_computation_is_removed_and_all_rules_combine():
    src = _problem(
        "        unused = torch.exp(x) * 3\n        return self.fc(torch.diag(v) @ x)[-1]\n",
        "[torch.randn(4, 4), torch.randn(4)]",
        init="        self.fc = nn.Linear(4, 4)\n",
        params="x, v",
    )
    assert "exp" not in _checked_model_new(src, "rewrite:dead-code")
    _check(src, "rewrite:all")


@pytest.mark.parametrize(
    "effect",
    [
        "x.mul_(2)",  # an in-place method: FX calls every method pure
        "torch.relu_(x)",
        "F.relu(x, inplace=True)",
        "self.act(x)",  # nn.ReLU(inplace=True)
        "self.bn(x)",  # updates its running statistics
        "torch.rand(3)",  # shifts every later draw
        "F.dropout(x, 0.5)",
        "torch.exp(x, out=x)",
        # effects no name gives away: read from the ATen ops the node runs
        "F.gumbel_softmax(x)",  # draws through exponential_ on a fresh tensor
        "torch.ops.aten.add_.Tensor(x, 1)",
        "self.pool(x[None, None])",  # nn.FractionalMaxPool2d draws its sample points
        "x[0].clamp_(0)",  # writes into a view of an input
    ],
)
def test_dead_code_keeps_what_has_an_effect_besides_its_result(effect: str):
    src = _problem(
        f"        {effect}\n        unused = x * 3\n        return x + torch.randn_like(x)\n",
        "[torch.randn(5, 4)]",
        init="        self.act = nn.ReLU(inplace=True)\n        self.bn = nn.BatchNorm1d(4)\n"
        "        self.pool = nn.FractionalMaxPool2d(2, output_ratio=0.5)\n",
        imports=F_IMPORT,
    )
    found = rewrite_sources(src)
    assert "rewrite:dead-code" in found, sorted(found)
    forward = found["rewrite:dead-code"][0].split("class ModelNew")[1]
    assert "mul_2 = x * 3" not in forward and "x * 3" not in forward
    name = effect.split("(")[0].split(".")[-1]
    assert name in forward, (effect, forward)


def test_an_unused_shape_entry_alone_makes_no_dead_code_candidate():
    src = _problem(
        "        b, _, d = x.shape\n        return x.reshape(b, -1, d) * 2\n",
        "[torch.randn(2, 3, 4)]",
    )
    assert "rewrite:dead-code" not in rewrite_sources(src)


def test_dead_code_removes_a_layer_whose_buffers_it_only_reads():
    """A batch norm in eval mode reads its running statistics and writes nothing."""
    src = _problem(
        "        unused = self.bn(x)\n        return self.fc(x)\n",
        "[torch.randn(5, 4)]",
        init="        self.bn = nn.BatchNorm1d(4).eval()\n        self.fc = nn.Linear(4, 4)\n",
    )
    assert "self.bn" not in _checked_model_new(src, "rewrite:dead-code")


def test_a_forward_with_type_annotations_is_rewritten():
    """FX keeps ``x: torch.Tensor`` as a global of its own in the generated forward."""
    src = HEAD + (
        "class Model(nn.Module):\n"
        "    def forward(self, d: torch.Tensor, x: torch.Tensor) -> torch.Tensor:\n"
        "        return torch.diag(d) @ x\n"
        "def get_inputs():\n    return [torch.randn(6), torch.randn(6, 4)]\n"
        "def get_init_inputs():\n    return []\n"
    )
    text = _check(src, "rewrite:diag-broadcast")
    assert "= torch.Tensor\n" in text


def test_untraceable_models_raise_a_typed_error():
    from kernelopt.proposer.rewrites.graph import RewriteError

    src = _problem(
        "        if float(x.sum()) > 0:\n            x = x + 1\n        return x\n",
        "[torch.randn(3)]",
    )
    with pytest.raises(RewriteError, match="nor at its input shapes"):  # a value decides
        rewrite_sources(src)


def test_a_data_dependent_output_shape_is_refused_in_one_line():
    src = _problem("        return torch.unique(x, return_counts=True)\n", "[torch.randn(5)]")
    with pytest.raises(RewriteError) as caught:
        rewrite_sources(src)
    assert str(caught.value) == (
        "shape propagation failed at unique (call_function unique): "
        "DynamicOutputShapeException: aten._unique2.default"
    )


def test_the_proposer_holds_no_problem_names_or_tables():
    """No suite problem -- nor any of the unseen set, which no family may be tuned on -- is
    named anywhere in the proposer (matching is by graph, not name)."""
    root = Path(__file__).resolve().parents[3]
    files = [*(root / "problems").glob("level*/*.py"), *(root / "problems").glob("unseen/*.py")]
    stems = {re.sub(r"^\d+_", "", p.stem) for p in files}
    text = "\n".join(p.read_text() for p in (root / "kernelopt" / "proposer").rglob("*.py"))
    # multi-word problem names (single op names such as "bmm" are legitimately ATen ops)
    named = [s for s in stems if "_" in s and re.search(rf"\b{s}\b", text)]
    assert len(stems) > 60 and not named, named
    assert "level1" not in text and "level2" not in text and "level3" not in text


@pytest.mark.parametrize("lower", [True, False])
def test_the_triangular_helpers_match_dense_products_on_any_shape(lower: bool):
    from kernelopt.proposer.rewrites.helpers import (
        _ko_dense_times_triangular,
        _ko_masked_product,
        _ko_triangular_product,
        _ko_triangular_times_dense,
    )

    mask = torch.tril if lower else torch.triu
    torch.manual_seed(0)
    for a_shape, b_shape in [((9, 9), (9, 9)), ((2, 3, 8, 8), (8, 8)), ((4, 4), (3, 4, 4))]:
        a = mask(torch.randn(a_shape, dtype=torch.float64))
        b = mask(torch.randn(b_shape, dtype=torch.float64))
        got = _ko_triangular_product(a, b, lower, leaf=2)
        torch.testing.assert_close(got, a @ b, rtol=1e-12, atol=1e-12)
    for x_shape, y_shape in [((9, 5), (5, 9)), ((2, 7, 3), (3, 7)), ((6, 4), (4, 5))]:
        x = torch.randn(x_shape, dtype=torch.float64)
        y = torch.randn(y_shape, dtype=torch.float64)
        got = _ko_masked_product(x, y, lower, leaf=2)
        torch.testing.assert_close(got, mask(x @ y), rtol=1e-12, atol=1e-12)
        # one triangular side: the square one masked, the other dense
        t = mask(torch.randn(y_shape[-2], y_shape[-2], dtype=torch.float64))
        torch.testing.assert_close(_ko_triangular_times_dense(t, y, lower, 2), t @ y)
        t = mask(torch.randn(x_shape[-1], x_shape[-1], dtype=torch.float64))
        torch.testing.assert_close(_ko_dense_times_triangular(x, t, lower, 2), x @ t)


def test_triangular_products_are_blocked_and_masked_products_skip_dropped_blocks(
    monkeypatch: pytest.MonkeyPatch,
):
    from kernelopt.proposer.rewrites import helpers

    monkeypatch.setattr(helpers, "TRIANGULAR_LEAF", 2)  # so the small check runs the blocks
    src = _problem(
        "        return torch.matmul(torch.tril(a), torch.tril(b)) + torch.triu(a @ b.t())\n",
        "[torch.randn(2, 11, 11), torch.randn(11, 11)]",
        params="a, b",
    )
    forward = _checked_model_new(src, "rewrite:triangular-product")
    assert "_ko_triangular_product(tril, tril_1, True, 2)" in forward
    assert "_ko_masked_product(" in forward and "torch.triu" not in forward
    one_side = {
        "torch.tril(a), torch.triu(b)": "_ko_triangular_times_dense(tril, triu, True, 2)",
        "torch.tril(a, 1), torch.triu(b)": "_ko_dense_times_triangular(tril, triu, False, 2)",
        "a, torch.tril(b)": "_ko_dense_times_triangular(a, tril, True, 2)",
    }
    for operands, call in one_side.items():
        other = src.replace("torch.tril(a), torch.tril(b)", operands)
        other = other.replace("torch.triu(a @ b.t())", "a")
        assert call in _checked_model_new(other, "rewrite:triangular-product")
    neither = src.replace("torch.tril(a), torch.tril(b)", "torch.tril(a, 1), torch.triu(b, -1)")
    assert "rewrite:triangular-product" not in rewrite_sources(neither.replace("@ b.t()", "* b"))


def _reduced(forward: str) -> str:
    """The reduce-before-linear tests' problem: a linear map and a weight, over ``[3, 7, 6]``."""
    init = "        self.fc = nn.Linear(6, 5)\n        self.w = nn.Parameter(torch.randn(6, 4))\n"
    return _problem(forward, "[torch.randn(3, 7, 6)]", init=init, imports=F_IMPORT)


_REDUCED = _reduced(
    "        a = self.fc(x).sum(dim=-1, keepdim=True)\n"
    "        b = torch.mean(self.fc(x), 1)\n"
    "        c = torch.sum(x @ self.w, dim=0)\n"
    "        d = F.linear(x, self.fc.weight, self.fc.bias).sum((1,))\n"
    "        return a.sum() + b.sum() + c.sum() + d.sum()\n"
)


def test_sums_and_means_move_before_the_linear_maps_they_reduce():
    forward = _checked_model_new(_REDUCED, "rewrite:reduce-before-linear")
    assert "fc = self.fc(" not in forward and "matmul = x @ self_w" not in forward
    _, done = rewrite_sources(_REDUCED)["rewrite:reduce-before-linear"]
    # the final .sum() of each branch reduces a sum or mean, not a linear map: untouched
    assert sorted(done) == [
        "mean over a row axis moved before the linear map",
        "sum over a row axis moved before the linear map",
        "sum over a row axis moved before the linear map",
        "sum over the output features moved before the linear map",
    ]


@pytest.mark.parametrize(
    "forward, moved",
    [
        ("self.fc(x).sum(dim=(0, 1))", 0),  # two axes at once
        ("self.fc(x).sum(-1, dtype=torch.float64)", 0),  # a dtype change
        ("torch.relu(self.fc(x)).sum(-1)", 0),  # not linear between them
        ("self.fc(x).mean() + self.fc(x).sum(-1).sum()", 1),  # all axes: only the second
        ("torch.sum(x, dim=1, keepdim=True)", 0),  # an input reduced: no map at all
    ],
)
def test_reductions_stay_where_the_identity_does_not_hold(forward: str, moved: int):
    src = _reduced(f"        return {forward}\n")
    found = rewrite_sources(src).get("rewrite:reduce-before-linear")
    assert (len(found[1]) if found else 0) == moved
    if moved:
        _check(src, "rewrite:reduce-before-linear")


def test_a_rule_that_fails_leaves_the_others_their_candidates(monkeypatch: pytest.MonkeyPatch):
    from kernelopt.proposer import rewrites

    def broken(gm):
        raise IndexError("tuple index out of range")

    monkeypatch.setitem(rewrites.RULES, "broken", broken)
    src = _reduced("        return self.fc(x).sum(-1)\n")
    assert "rewrite:reduce-before-linear" in rewrite_sources(src)


def test_a_product_chain_is_reordered_only_where_the_shapes_make_it_far_cheaper():
    src = _problem(
        "        y = (a @ b) @ v\n"  # matrix times matrix, then a vector: do b @ v first
        "        z = x @ torch.matmul(self.w1, self.w2)\n"  # thin x: take it through w1 first
        "        return y.sum() + z.sum() + (a @ a) @ a\n",  # squares alike: stays
        "[torch.randn(2, 30, 30), torch.randn(30, 50), torch.randn(50), torch.randn(3, 48)]",
        init="        self.w1 = nn.Parameter(torch.randn(48, 48))\n"
        "        self.w2 = nn.Parameter(torch.randn(48, 40))\n",
        params="a, b, v, x",
    )
    forward = _checked_model_new(src, "rewrite:reassociate-products")
    assert re.search(r"(\w+) = b @ v;.*\n\s*\w+ = a @ \1;", forward)
    assert re.search(r"(\w+) = x @ w1;.*\n\s*\w+ = \1 @ w2;", forward)
    assert re.search(r"(\w+) = a @ a\n\s*\w+ = \1 @ a;", forward)  # alike squares: as written
    _, done = rewrite_sources(src)["rewrite:reassociate-products"]
    assert len(done) == 2 and all("product chain reordered" in d for d in done)


SHAPES_AS_INTS = HEAD + (
    "class Model(nn.Module):\n"
    "    def __init__(self):\n        super().__init__()\n        self.fc = nn.Linear(4, 4)\n"
    "    def forward(self, x):\n"
    "        h = x[:, : x.shape[1] // 2]\n"
    "        for _ in range(x.shape[0]):\n"
    "            h = torch.tanh(h)\n"
    "        unused = torch.exp(x)\n"
    "        return self.fc(torch.cat([h, h], -1))\n"
    "def get_inputs():\n    return [torch.randn(3, 4)]\n"
    "def get_holdout_inputs():\n    return [[torch.randn(3, 4)]]\n"
    "def get_init_inputs():\n    return []\n"
)


def test_a_forward_that_uses_shapes_as_ints_is_traced_at_its_input_shapes():
    """FX cannot slice by, or loop over, a traced size; the meta tracer knows the sizes."""
    assert "exp" not in _checked_model_new(SHAPES_AS_INTS, "rewrite:dead-code")


def test_a_forward_whose_graph_depends_on_its_input_shapes_gets_no_rewrite():
    varying = SHAPES_AS_INTS.replace("[[torch.randn(3, 4)]]", "[[torch.randn(5, 4)]]")
    with pytest.raises(RewriteError, match="differs between them"):
        rewrite_sources(varying)
