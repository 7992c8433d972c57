"""Every problem file in problems/ follows the KernelBench format and runs on the CPU.

Covered: the level suites (``level*/``) and the unseen set (``unseen/``, written after
the built-in proposer's families and reported apart from the levels).

The suite is sized for an H200, so a forward pass at full size can take seconds
on a 2-core CPU.  The cost of each input set is first estimated on the meta
device (FLOPs via FlopCounterMode, bytes from tensor sizes, no real compute);
input sets above the budget are not run on the CPU, and each problem must have
at least one input set (usually a held-out one) that is cheap enough to run.
"""

from __future__ import annotations

import ast
import importlib.util
import math
import re
from pathlib import Path
from types import ModuleType

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

ROOT = Path(__file__).resolve().parents[2] / "problems"
LEVELS = sorted(ROOT.glob("level*/*.py"))
UNSEEN = sorted(ROOT.glob("unseen/*.py"))
PROBLEMS = LEVELS + UNSEEN
UNSEEN_SIZE = 10
NAME_RE = re.compile(r"^\d{3}_[a-z0-9_]+\.py$")

# CPU budget per input set: ~0.15 s of GEMM at ~150 GFLOP/s, ~0.3 s of pointwise work
MAX_CPU_FLOPS = 2.0e10
MAX_CPU_NUMEL = 4.0e7
# GPU budget: parameters + inputs + outputs must leave room for intermediates in 4 GB
MAX_GPU_BYTES = 2.0 * 2**30


def _id(path: Path) -> str:
    return f"{path.parent.name}/{path.stem}"


def _load(path: Path) -> ModuleType:
    name = f"kernelopt_problem_{path.parent.name}_{path.stem}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _tensors(value: object) -> list[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (list, tuple)):
        return [t for item in value for t in _tensors(item)]
    return []


def _input_sets(module: ModuleType) -> list[tuple[str, list]]:
    sets = [("main", list(module.get_inputs()))]
    if hasattr(module, "get_holdout_inputs"):
        sets += [(f"holdout{i}", list(s)) for i, s in enumerate(module.get_holdout_inputs())]
    return sets


def _meta_cost(module: ModuleType) -> dict[str, tuple[float, float, float]]:
    """(flops, largest tensor numel, bytes of params+inputs+outputs) per input set, on meta."""
    costs: dict[str, tuple[float, float, float]] = {}
    with torch.device("meta"):
        model = module.Model(*module.get_init_inputs())
        param_bytes = sum(t.numel() * t.element_size() for t in model.state_dict().values())
        for label, inputs in _input_sets(module):
            with torch.no_grad(), FlopCounterMode(display=False) as counter:
                out = model(*inputs)
            tensors = _tensors(inputs) + _tensors(out)
            numel = max((t.numel() for t in tensors), default=0)
            io_bytes = sum(t.numel() * t.element_size() for t in tensors)
            costs[label] = (float(counter.get_total_flops()), float(numel), param_bytes + io_bytes)
    return costs


@pytest.mark.parametrize("path", PROBLEMS, ids=_id)
def test_file_structure(path: Path) -> None:
    assert NAME_RE.match(path.name), f"{path.name}: expected NNN_snake_case.py"
    tree = ast.parse(path.read_text(), filename=str(path))
    doc = ast.get_docstring(tree)
    assert doc and "Category:" in doc and "interesting" in doc, "docstring needs category and why"
    classes = {n.name for n in tree.body if isinstance(n, ast.ClassDef)}
    functions = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    assert "Model" in classes
    for required in ("get_inputs", "get_init_inputs"):
        assert required in functions, f"missing {required}()"
        assert not functions[required].args.args, f"{required}() must take no arguments"


def test_suite_size() -> None:
    levels = {p.parent.name for p in LEVELS}
    counts = {lvl: sum(p.parent.name == lvl for p in LEVELS) for lvl in levels}
    assert counts.get("level1", 0) >= 30
    assert counts.get("level2", 0) >= 15
    assert counts.get("level3", 0) >= 6


@pytest.mark.parametrize("path", PROBLEMS, ids=_id)
def test_problem_runs(path: Path) -> None:
    module = _load(path)
    costs = _meta_cost(module)
    main_shapes = None
    ran = []
    for label, inputs in _input_sets(module):
        flops, numel, gpu_bytes = costs[label]
        assert gpu_bytes < MAX_GPU_BYTES, f"{label}: {gpu_bytes / 2**30:.2f} GiB of tensors"
        for t in _tensors(inputs):
            assert t.device.type == "cpu" and t.dtype == torch.float32, f"{label}: {t.dtype}"
        shapes = [tuple(t.shape) for t in _tensors(inputs)]
        if label == "main":
            main_shapes = shapes
        else:
            assert shapes != main_shapes, f"{label} repeats the main shapes"
        if flops > MAX_CPU_FLOPS or numel > MAX_CPU_NUMEL:
            continue
        torch.manual_seed(0)
        model = module.Model(*module.get_init_inputs())
        with torch.no_grad():
            out = model(*inputs)
        outputs = _tensors(out)
        assert outputs, f"{label}: forward returned no tensor"
        for t in outputs:
            assert t.dtype == torch.float32, f"{label}: output dtype {t.dtype}"
            assert torch.isfinite(t).all(), f"{label}: non-finite output"
        ran.append(label)
    # a problem no CPU run can reach would go untested here: it needs a cheap held-out set
    assert ran, f"every input set exceeds the CPU budget: {costs}"


@pytest.mark.parametrize("path", PROBLEMS, ids=_id)
def test_weights_are_seeded(path: Path) -> None:
    """A manual_seed before construction must fix every parameter and buffer."""
    module = _load(path)
    states = []
    for _ in range(2):
        torch.manual_seed(1234)
        states.append(module.Model(*module.get_init_inputs()).state_dict())
    assert states[0].keys() == states[1].keys()
    for key in states[0]:
        assert torch.equal(states[0][key], states[1][key]), key


def test_unseen_set_is_its_own_numbered_set() -> None:
    """Ten files numbered 001..010, each in the README's unseen section, none a core fixture."""
    assert [p.name[:3] for p in UNSEEN] == [f"{i:03d}" for i in range(1, UNSEEN_SIZE + 1)]
    readme = (ROOT / "README.md").read_text()
    head = "## Unseen set"
    assert head in readme
    section = readme.split(head, 1)[1].split("\n## ", 1)[0]
    for path in UNSEEN:
        assert f"`{path.name}`" in section, f"{path.name} missing from the unseen section"
    core = (ROOT / "core.txt").read_text()
    assert "unseen/" not in core


def test_readme_and_core_set_cover_the_suite() -> None:
    readme = (ROOT / "README.md").read_text()
    for path in PROBLEMS:
        assert path.name in readme, f"{path.name} missing from problems/README.md"
    core = [line.strip() for line in (ROOT / "core.txt").read_text().splitlines() if line.strip()]
    assert len(core) == 12 and len(set(core)) == 12
    for rel in core:
        assert (ROOT / rel).is_file(), rel


def test_meta_cost_sees_gemm_flops() -> None:
    """The CPU budget relies on FlopCounterMode; make sure it counts a known GEMM."""
    module = _load(ROOT / "level1" / "019_gemm_square.py")
    flops = _meta_cost(module)["main"][0]
    assert math.isclose(flops, 2 * 4096**3, rel_tol=1e-6)
