"""Which baseline gate 4 times beside a candidate (``CompiledLayout.baseline_for``)."""

from __future__ import annotations

from pathlib import Path

from gates.layout import CompiledLayout
from kernelopt.contracts import ProblemSpec
from kernelopt.contracts.problem import ProblemKind
from kernelopt.kinds.compile import WRAPPER
from kernelopt.store import open_store
from tests.support.compiled import stub_compiled

SHIM = "class ModelNew:\n    pass\n"


def _layout(tmp_path: Path, kind: ProblemKind, wrapper: str) -> CompiledLayout:
    store = open_store(tmp_path / "artifacts")
    source = store.put_text("def launch(x):\n    return x\n", name="p.py")
    compiled = stub_compiled(
        ProblemSpec(name="p", kind=kind, source=source), store.put_text(wrapper, name="w.py")
    )
    (tmp_path / "work").mkdir()
    return CompiledLayout(compiled, store, tmp_path / "work")


def test_a_kernel_problems_baseline_beside_a_model_new_is_its_own_model_new(
    tmp_path: Path,
) -> None:
    text = WRAPPER.format(kind="triton", how="h", source=SHIM, names=[], roles=[], seed=0)
    layout = _layout(tmp_path, ProblemKind.TRITON, text)
    beside_model = layout.baseline_for(whole_forward=True)
    assert beside_model.kind == "candidate"
    assert Path(beside_model.candidate_path).read_text() == SHIM
    assert layout.baseline_for(whole_forward=False).kind == "wrapper"
    assert Path(beside_model.candidate_path) in layout.child_files()  # guarded like the rest


def test_an_inductor_baseline_and_an_unknown_wrapper_stay_the_wrapper(tmp_path: Path) -> None:
    inductor = _layout(tmp_path / "a", ProblemKind.MODULE, "def call(args):\n    pass\n")
    assert inductor.baseline_for(whole_forward=True).kind == "wrapper"
    unknown = _layout(tmp_path / "b", ProblemKind.TRITON, "def call(args):\n    pass\n")
    assert unknown.own_baseline is None
    assert unknown.baseline_for(whole_forward=True).kind == "wrapper"
    assert unknown.child_files() == [unknown.compiled_json]
