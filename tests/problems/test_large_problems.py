"""problems/large/: three large models of our own (issue 31), checked on the CPU.

At full size they are sized for an H200 (ResNet-50 at batch 128, ViT-B/16 at
batch 128, GPT-2 small at 8 x 1024 tokens), far beyond a CPU test, so the full
size is checked on the meta device (parameter counts, tensor bytes) and the
forward runs at ``KERNELOPT_SMALL=1``, which keeps every model's depth -- and so
its kernel structure -- and shrinks widths, batch and resolution.
"""

from __future__ import annotations

import ast
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest
import torch

from kernelopt.kinds.registry import check_problem_file, load_problem
from kernelopt.preflight_problem import check_problem

ROOT = Path(__file__).resolve().parents[2] / "problems" / "large"
LARGE = sorted(ROOT.glob("[0-9][0-9][0-9]_*.py"))
# the published models' sizes: ours are "-like" (no token embedding in the decoder)
PARAMS = {"001_resnet50": 25.6e6, "002_vit_b16": 86.6e6, "003_gpt2_small": 124.4e6}
DEPTH_MODULES = (torch.nn.Conv2d, torch.nn.Linear, torch.nn.LayerNorm, torch.nn.BatchNorm2d)


def _load(path: Path, small: bool, monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """A fresh import: the size is read from the environment when the module loads."""
    if small:
        monkeypatch.setenv("KERNELOPT_SMALL", "1")
    else:
        monkeypatch.delenv("KERNELOPT_SMALL", raising=False)
    name = f"kernelopt_large_{path.stem}_{'small' if small else 'full'}"
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    sys.modules.pop(name, None)
    return module


def _structure(model: torch.nn.Module) -> list[str]:
    return [type(m).__name__ for m in model.modules() if isinstance(m, DEPTH_MODULES)]


def test_the_three_models_are_there() -> None:
    assert [p.stem for p in LARGE] == list(PARAMS)


@pytest.mark.parametrize("path", LARGE, ids=lambda p: p.stem)
def test_file_format(path: Path) -> None:
    tree = ast.parse(path.read_text())
    doc = ast.get_docstring(tree)
    assert doc and "Category:" in doc and "interesting" in doc and "KERNELOPT_SMALL" in doc
    check_problem_file(path)  # kernelopt's own text checks


@pytest.mark.parametrize("path", LARGE, ids=lambda p: p.stem)
def test_full_size_on_meta(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    module = _load(path, small=False, monkeypatch=monkeypatch)
    with torch.device("meta"):
        model = module.Model(*module.get_init_inputs())
        inputs = module.get_inputs()
        out = model(*inputs)
    params = sum(p.numel() for p in model.parameters())
    assert params == pytest.approx(PARAMS[path.stem], rel=0.02)
    batch = inputs[0].shape[0]
    assert batch >= 8  # a realistic H200 batch, not a toy one
    tensor_bytes = 4 * (params + sum(t.numel() for t in inputs) + out.numel())
    assert tensor_bytes < 4 * 2**30  # weights, inputs and outputs leave the H200 room to spare


@pytest.mark.parametrize("path", LARGE, ids=lambda p: p.stem)
def test_small_size_keeps_the_structure_and_runs(
    path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    full = _load(path, small=False, monkeypatch=monkeypatch)
    with torch.device("meta"):
        full_structure = _structure(full.Model(*full.get_init_inputs()))
    small = _load(path, small=True, monkeypatch=monkeypatch)
    torch.manual_seed(0)
    model = small.Model(*small.get_init_inputs())
    assert _structure(model) == full_structure  # same layers, so the same kernel structure
    assert sum(p.numel() for p in model.parameters()) < 2e6
    sets = [small.get_inputs(), *small.get_holdout_inputs()]
    shapes = [tuple(t.shape for t in s) for s in sets]
    assert len(set(shapes)) == len(shapes)  # held-out shapes differ from the main one
    for inputs in sets:
        assert all(t.dtype == torch.float32 for t in inputs)
        with torch.no_grad():
            out = model(*inputs)
        assert out.dtype == torch.float32 and out.shape[0] == inputs[0].shape[0]
        assert torch.isfinite(out).all()


@pytest.mark.parametrize("path", LARGE, ids=lambda p: p.stem)
def test_kernelopt_accepts_them(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KERNELOPT_SMALL", "1")
    loaded = load_problem(path)
    init = check_problem(path)  # what `kernelopt optimize` checks before a campaign
    assert init == loaded.get_init_inputs()
    states = []
    for _ in range(2):  # a seed fixes every weight
        states.append(loaded.make_model(1234, device="cpu").state_dict())
    assert all(torch.equal(states[0][k], states[1][k]) for k in states[0])
