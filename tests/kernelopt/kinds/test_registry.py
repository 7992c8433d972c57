"""One class per kind behind ``Kind``, one loader, one seeding rule (issue 27 point 1)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from gates.problem_io import ProblemFile
from kernelopt.contracts.problem import ProblemKind
from kernelopt.errors import ProblemError
from kernelopt.kinds.base import Kind
from kernelopt.kinds.kernel import HelionKind, TritonKind
from kernelopt.kinds.module import ModuleKind
from kernelopt.kinds.registry import (
    KINDS,
    check_problem_file,
    kind_for,
    kind_named,
    kind_of_file,
    load_problem,
)
from kernelopt.loaded_problem import seeded
from kernelopt.pyfile import import_source
from tests.kernelopt.kinds.conftest import PROBLEMS
from tests.support.wrappers import DATA

MODULE = DATA / "tiny_linear_relu.py"
TRITON = PROBLEMS / "scale_add.py"


def test_every_problem_kind_has_exactly_one_class() -> None:
    assert set(KINDS) == set(ProblemKind)
    for kind, impl in KINDS.items():
        assert impl.kind == kind and kind_named(kind.value) is impl
    assert isinstance(kind_named(ProblemKind.HELION), HelionKind)


def test_each_kinds_capabilities_agree_with_its_class() -> None:
    """What callers ask of ``ProblemKind`` is what the kind's class does."""
    for kind, impl in KINDS.items():
        assert impl.own_baseline is kind.own_baseline
        own_variants = type(impl).builtin_variants is not Kind.builtin_variants
        # the built-in proposer walks the kind's own launch space, or Inductor's: never both
        assert kind.inductor_variants is not own_variants
        # a launcher that is the whole forward is a launch space of the kind's own
        assert not kind.whole_forward_only or own_variants
    assert ProblemKind.MODULE.inductor_variants and not ProblemKind.MODULE.whole_forward_only
    assert ProblemKind.TRITON.whole_forward_only and ProblemKind.HELION.whole_forward_only


def test_the_kind_of_a_file_for_display(tmp_path: Path) -> None:
    assert isinstance(kind_of_file(TRITON), TritonKind)
    assert isinstance(kind_of_file(str(MODULE)), ModuleKind)
    assert isinstance(kind_of_file(tmp_path / "gone.py"), ModuleKind)  # unreadable: a module


@pytest.mark.parametrize(
    ("path", "cls", "own_baseline"), [(MODULE, ModuleKind, False), (TRITON, TritonKind, True)]
)
def test_the_file_text_picks_the_kind_and_the_loaded_problem_carries_it(
    path: Path, cls: type, own_baseline: bool
) -> None:
    source = path.read_text()
    assert isinstance(kind_for(source), cls)
    assert isinstance(check_problem_file(path), cls)
    loaded = load_problem(path)
    assert isinstance(loaded.runtime, cls)
    assert loaded.own_baseline is own_baseline


def test_source_text_loads_like_its_file() -> None:
    """The compile step passes text, the gates a path: both must give the same problem."""
    from_text = load_problem(MODULE.read_text(), name="tiny")
    from_path = load_problem(MODULE)
    assert from_text.name == "tiny" and from_path.name == MODULE.stem
    assert from_text.source_sha256 == from_path.source_sha256
    a, b = from_text.make_inputs(3, device="cpu"), from_path.make_inputs(3, device="cpu")
    assert all(torch.equal(x, y) for x, y in zip(a, b, strict=True))


def test_a_module_has_no_own_baseline_and_a_kernel_problem_does() -> None:
    module = ProblemFile(MODULE)
    assert module.baseline(0, "cpu") is None
    module.build(module.Model, 0, "cpu")  # no kernel checks for a module: builds plainly
    kernel = ProblemFile(TRITON)
    baseline = kernel.baseline(0, "cpu")
    assert isinstance(baseline, torch.nn.Module)
    inputs = kernel.inputs(0)
    want = kernel.build(kernel.Model, 0, "cpu")(*inputs)
    torch.testing.assert_close(baseline(*inputs), want)


def test_the_gates_and_the_compile_step_draw_the_same_tensors_from_a_seed() -> None:
    loaded = load_problem(MODULE)
    gate = ProblemFile(MODULE)
    for x, y in zip(gate.inputs(7), loaded.make_inputs(7, device="cpu"), strict=True):
        assert torch.equal(x, y)
    a = gate.build(gate.Model, 7, "cpu")
    b = loaded.make_model(7, device="cpu")
    for (name, p), (_, q) in zip(a.state_dict().items(), b.state_dict().items(), strict=True):
        assert torch.equal(p, q), name
    assert not torch.equal(gate.inputs(7)[0], gate.inputs(8)[0])


def test_seeded_draws_after_seeding() -> None:
    first = seeded(11, lambda: torch.randn(4))
    torch.randn(100)  # the global RNG moves on; a seeded draw does not care
    assert torch.equal(seeded(11, lambda: torch.randn(4)), first)


def test_a_module_kind_has_no_builtin_launch_space_of_its_own() -> None:
    assert ModuleKind().builtin_variants(None, None) is None  # type: ignore[arg-type]


def test_a_kernel_file_that_is_not_a_kernel_problem_is_named(tmp_path: Path) -> None:
    path = tmp_path / "bad.py"
    path.write_text("import triton\n\n@triton.jit\ndef k(x):\n    pass\n")
    with pytest.raises(ProblemError, match="reference"):
        check_problem_file(path)


def test_generated_source_is_imported_once_per_process(tmp_path: Path) -> None:
    text = "import itertools\nCOUNTER = itertools.count()\nFIRST = next(COUNTER)\n"
    one = import_source(text, "kernelopt_test_registry_once", tmp_path)
    two = import_source(text, "kernelopt_test_registry_once", tmp_path)
    assert one is two and (tmp_path / "kernelopt_test_registry_once.py").read_text() == text
