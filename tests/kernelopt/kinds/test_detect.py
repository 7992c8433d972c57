"""Kind detection and the text-only checks that run before a campaign is submitted."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kernelopt.campaigns import prepare_problem
from kernelopt.contracts.problem import ProblemKind
from kernelopt.errors import ProblemError
from kernelopt.kinds import check_kernel_source, detect_kind
from kernelopt.kinds.registry import check_problem_file
from kernelopt.store import open_store
from tests.kernelopt.kinds.conftest import PROBLEMS, ROOT

TRITON_OK = """
import torch
import triton
import triton.language as tl


@triton.jit
def _k(x_ptr, n, BLOCK: tl.constexpr):
    pass


def launch(x, y, *, BLOCK: int = 128):
    return x + y


def reference(x, y):
    return x + y


def get_inputs():
    return [torch.randn(4), torch.randn(4)]
"""


def test_kinds_are_read_from_decorators_not_substrings() -> None:
    module = (ROOT / "problems" / "level1" / "001_relu_chain.py").read_text()
    assert detect_kind(module) == ProblemKind.MODULE
    assert detect_kind(TRITON_OK) == ProblemKind.TRITON
    aliased = TRITON_OK.replace("import triton\n", "from triton import jit\nimport triton\n")
    assert detect_kind(aliased.replace("@triton.jit", "@jit")) == ProblemKind.TRITON
    mention = "# decorate kernels with @triton.jit or @helion.kernel\nimport helion\nx = 1\n"
    assert detect_kind(mention) == ProblemKind.MODULE
    helion_src = "import helion\n\n@helion.kernel(static_shapes=True)\ndef f(x):\n    return x\n"
    assert detect_kind(helion_src) == ProblemKind.HELION
    with_model = TRITON_OK + "\n\nclass Model:\n    pass\n"
    assert detect_kind(with_model) == ProblemKind.MODULE  # a module written with Triton


def test_our_examples_pass_the_text_checks() -> None:
    for path in sorted((ROOT / "problems" / "triton").glob("*.py")):
        assert check_kernel_source(path.read_text(), str(path)).kind == ProblemKind.TRITON
        check_problem_file(path)


@pytest.mark.parametrize(
    ("edit", "reason"),
    [
        (lambda s: s.replace("def reference(x, y)", "def _ref(x, y)"), "reference() is missing"),
        (lambda s: s.replace("def launch(x, y", "def launch(y, x"), "same names in the same order"),
        (lambda s: s.replace("def reference(x, y)", "def reference(x)"), "does not match"),
        (lambda s: s.replace("BLOCK: int = 128", "BLOCK: int"), "need defaults"),
        (lambda s: s + "\n\nclass ModelNew:\n    pass\n", "must not define ModelNew"),
        (lambda s: s.replace("return x + y\n\n\ndef ref", "return x +\n\n\ndef ref"), "syntax"),
    ],
)
def test_bad_kernel_files_are_rejected_with_the_reason(edit, reason: str) -> None:
    with pytest.raises(ProblemError) as info:
        check_kernel_source(edit(TRITON_OK), "bad.py")
    assert info.value.path == "bad.py"
    assert reason in info.value.reason


def test_prepare_problem_records_the_kind_and_rejects_a_mismatched_launcher(
    tmp_path: Path,
) -> None:
    store = open_store(tmp_path / "artifacts")
    spec = prepare_problem(PROBLEMS / "scale_add.py", store)
    assert spec.kind == ProblemKind.TRITON and spec.name == "scale_add"
    assert store.get_text(spec.source) == (PROBLEMS / "scale_add.py").read_text()
    with pytest.raises(ProblemError) as info:
        prepare_problem(PROBLEMS / "swapped_args.py", store)
    assert info.value.path.endswith("swapped_args.py")
    assert "launch(y, x) does not match reference(x, y)" in info.value.reason


def test_missing_helion_says_how_to_install_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import kernelopt.kinds.detect as detect

    monkeypatch.setattr(detect, "helion_available", lambda: False)
    with pytest.raises(ProblemError) as info:
        prepare_problem(ROOT / "problems" / "helion" / "001_rmsnorm.py", open_store(tmp_path))
    assert "pip install 'kernelopt[helion]'" in info.value.reason
    assert info.value.path.endswith("001_rmsnorm.py")


def test_verify_reports_a_bad_kernel_file_as_could_not_run(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from kernelopt.cli.verify import verify_command

    code = verify_command(
        PROBLEMS / "swapped_args.py", PROBLEMS / "scale_add.py", True, device="cpu"
    )
    out = json.loads(capsys.readouterr().out)
    assert code == 2 and out["could_not_run"] is True
    assert "does not match reference" in out["reason"]
