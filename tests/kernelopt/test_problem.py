"""Problem loader: AST-only checks (no torch) and import-time validation."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from kernelopt.contracts.problem import ProblemKind
from kernelopt.errors import ProblemError
from kernelopt.kinds.detect import detect_kind
from kernelopt.kinds.registry import check_problem_file, load_problem
from kernelopt.problem import check_problem_source
from tests.support.wrappers import DATA, ROOT

GOOD = (DATA / "tiny_linear_relu.py").read_text()


@pytest.mark.parametrize(
    ("source", "reason"),
    [
        ("def broken(:\n", "syntax error"),
        ("import torch\ndef get_inputs(): return []\ndef get_init_inputs(): return []\n", "Model"),
        (
            "Model = 3\ndef get_inputs(): return []\ndef get_init_inputs(): return []\n",
            "not as a class",
        ),
        (
            "class Model:\n    pass\ndef get_inputs(): return []\ndef get_init_inputs(): return []\n",
            "forward",
        ),
        (
            "class Net:\n    pass\nModel = Net\ndef get_inputs(): return []\n"
            "def get_init_inputs(): return []\n",
            "forward",
        ),
        (
            "class Model:\n    def forward(self, x): return x\ndef get_inputs(): return []\n",
            "get_init_inputs",
        ),
    ],
)
def test_ast_check_names_the_problem(source: str, reason: str) -> None:
    with pytest.raises(ProblemError) as info:
        check_problem_source(source, "p.py")
    assert reason in info.value.reason
    assert info.value.path == "p.py"


def test_check_problem_file_does_not_import_torch(tmp_path: Path) -> None:
    path = tmp_path / "p.py"
    path.write_text(GOOD)
    code = (
        "import sys; from kernelopt.kinds.registry import check_problem_file; "
        f"check_problem_file({str(path)!r}); print('torch' in sys.modules)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True
    )
    assert out.stdout.strip() == "False"


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ProblemError, match="does not exist"):
        check_problem_file(tmp_path / "nope.py")


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        ("def get_inputs(): return 5\n", "must return a list"),
        ("def get_inputs(): return [1, 2]\n", "no tensor"),
        (
            "def get_inputs(): return [[torch.randn(2, 16), torch.randn(3, 16)]]\n",
            r"get_inputs\(\)\[0\] is a list holding tensors; .* as separate arguments",
        ),
        ("def get_inputs(): return [{'x': torch.randn(2, 16)}]\n", "is a dict holding tensors"),
        (
            "from dataclasses import dataclass\n@dataclass\nclass Batch:\n    x: torch.Tensor\n"
            "def get_inputs(): return [Batch(torch.randn(2, 16))]\n",
            "is a Batch holding tensors",
        ),
        ("def get_inputs(): raise RuntimeError('boom')\n", "raised RuntimeError"),
        (
            "def get_inputs(): return [torch.randn(2, 16).to_sparse()]\n",
            r"get_inputs\(\)\[0\] is a sparse_coo tensor; .*dense",
        ),
        (
            "def get_inputs(): return [torch.randn(2, 16).to_sparse_csr()]\n",
            "is a sparse_csr tensor",
        ),
        (
            "def get_inputs(): return [torch.quantize_per_tensor(torch.randn(2, 16), 0.1, 0, "
            "torch.qint8)]\n",
            "is a quantized tensor",
        ),
    ],
)
def test_load_rejects_bad_get_inputs(body: str, reason: str) -> None:
    source = GOOD.split("def get_inputs")[0] + body + "\ndef get_init_inputs():\n    return [16]\n"
    with pytest.raises(ProblemError, match=reason):
        load_problem(source, name="bad")


def test_load_rejects_model_that_cannot_be_built() -> None:
    source = GOOD.replace("return [16]", "return ['not an int']")
    with pytest.raises(ProblemError, match="Model"):
        load_problem(source, name="bad_init")


_HEAD = "import torch\nimport torch.nn as nn\n\n"
_TAIL = (
    "\ndef get_inputs():\n    return [torch.randn(2, 8)]\n\ndef get_init_inputs():\n    return []\n"
)
_BLOCK = (
    "class Block(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
    "        self.fc = nn.Linear(8, 8)\n\n    def forward(self, x):\n        return self.fc(x)\n\n"
)


@pytest.mark.parametrize(
    "model",
    [
        "class Model(nn.Sequential):\n    def __init__(self):\n"
        "        super().__init__(nn.Linear(8, 8), nn.ReLU())\n",
        _BLOCK + "class Model(Block):\n    pass\n",
        "class Model(nn.Module):\n    def run(self, x):\n        return x * 2\n\n"
        "    forward = run\n",
        _BLOCK + "Model = Block\n",
    ],
    ids=["sequential", "file_base", "assigned", "alias"],
)
def test_a_model_whose_forward_is_inherited_or_assigned_loads(model: str) -> None:
    """Only a ``Model`` built on ``nn.Module`` alone must write ``def forward`` for the AST
    check; the import decides for other bases.  ``Model = Block`` names the module."""
    source = _HEAD + model + _TAIL
    check_problem_source(source, "p.py")
    assert detect_kind(source) == ProblemKind.MODULE
    problem = load_problem(source, name="inherited")
    assert problem.make_model(0, "cpu")(*problem.make_inputs(0, "cpu")).shape == (2, 8)


def test_a_model_that_inherits_no_forward_is_refused_at_import() -> None:
    source = _HEAD + "class Base(nn.Module):\n    pass\n\nclass Model(Base):\n    pass\n" + _TAIL
    check_problem_source(source, "p.py")
    with pytest.raises(ProblemError, match=r"defines no forward.*inherits none"):
        load_problem(source, name="no_forward")


def test_make_model_and_inputs_are_deterministic_from_the_seed() -> None:
    import torch

    problem = load_problem(DATA / "tiny_linear_relu.py")
    a, b = problem.make_model(3, "cpu"), problem.make_model(3, "cpu")
    c = problem.make_model(4, "cpu")
    assert torch.equal(a.fc.weight, b.fc.weight)
    assert not torch.equal(a.fc.weight, c.fc.weight)
    x1, x2 = problem.make_inputs(3, "cpu"), problem.make_inputs(3, "cpu")
    assert torch.equal(x1[0], x2[0])
    assert problem.make_inputs(0, "cpu", torch.float64)[0].dtype == torch.float64
    assert problem.make_holdout_inputs(0, "cpu") == []


def test_core_problem_files_pass_the_ast_check() -> None:
    problems = ROOT / "problems"
    for path in sorted([*problems.glob("level*/*.py"), *problems.glob("unseen/*.py")]):
        check_problem_file(path)


@pytest.mark.parametrize(
    ("name", "data"),
    [
        ("bom", b"\xef\xbb\xbf" + GOOD.encode()),
        ("crlf", GOOD.replace("\n", "\r\n").encode()),
        ("latin1", b"# -*- coding: latin-1 -*-\n# caf\xe9 = '\xe9'\n" + GOOD.encode()),
    ],
)
def test_files_python_reads_are_read(tmp_path: Path, name: str, data: bytes) -> None:
    """A byte-order mark or an encoding declaration, as editors write them, is honoured;
    the text kept (and written again as UTF-8) declares UTF-8."""
    from kernelopt.pyfile import read_source

    path = tmp_path / f"{name}.py"
    path.write_bytes(data)
    check_problem_file(path)
    problem = load_problem(path)
    assert problem.make_inputs(0, "cpu")
    text = read_source(path)
    assert not text.startswith("\ufeff")
    if name == "latin1":
        assert text.startswith("# -*- coding: utf-8 -*-\n# café")


def test_an_undecodable_file_is_a_problem_error(tmp_path: Path) -> None:
    path = tmp_path / "bad.py"
    path.write_bytes(b"# caf\xe9\n" + GOOD.encode())
    with pytest.raises(ProblemError, match="cannot read"):
        check_problem_file(path)


def test_lazy_modules_are_made_by_one_call_that_leaves_no_other_trace() -> None:
    """Shapes from the seed's inputs; batch-norm statistics as built; a ModelNew(Model)
    whose own forward expects them made gets them from Model's forward."""
    import torch

    path = ROOT / "tests" / "problems" / "identity" / "lazy_modules.py"
    problem = load_problem(path)
    model = problem.make_model(0, "cpu")
    assert model.inp.weight.shape == (24, 12) and model.out.weight.shape == (8, 24)
    assert int(model.bn.num_batches_tracked) == 0 and not model.bn.running_mean.any()
    again = problem.make_model(0, "cpu")
    assert torch.equal(model.inp.weight, again.inp.weight)

    class Generated(problem.model_class):
        def forward(self, x):  # as generated code: reads the weight directly
            return x @ self.inp.weight.t()

    built = problem.build(Generated, 0)
    assert torch.equal(built.inp.weight, model.inp.weight)
