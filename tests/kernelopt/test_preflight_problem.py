"""Bad input is caught before submission: import and build in a CPU child, time-limited."""

from __future__ import annotations

from pathlib import Path

import pytest

from gates.sandbox import confine_preflight
from kernelopt.errors import ProblemError
from kernelopt.preflight_problem import preflight
from tests.support.cli import run_cli
from tests.support.paths import ROOT
from tests.support.temporal import env_for, make_settings

TAIL = """

class Model(nn.Module):
    def forward(self, x):
        return x


def get_inputs():
    return [torch.randn(4)]


def get_init_inputs():
    return []
"""
HEAD = "import torch\nimport torch.nn as nn\n"

CASES = {
    # name: (source, line the message must name, words of the cause)
    "raises_at_import": (HEAD + "\nSCALE = 1 / 0\n" + TAIL, 4, "ZeroDivisionError"),
    "wrong_signature": (
        HEAD + TAIL.replace("def forward(self, x):", "def forward(self, x, y):"),
        6,
        "does not take the 1 input(s)",
    ),
    "bad_inputs": (HEAD + TAIL.replace("torch.randn(4)", "torch.randn(4, -1)"), 11, "negative"),
    "init_fails": (
        HEAD
        + TAIL.replace(
            "def forward",
            "def __init__(self):\n        super().__init__()\n"
            "        raise ValueError('no weights')\n\n    def forward",
        ),
        8,
        "no weights",
    ),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_broken_problem_is_named_with_its_line_and_cause(tmp_path: Path, name: str) -> None:
    source, line, cause = CASES[name]
    path = tmp_path / f"{name}.py"
    path.write_text(source)
    with pytest.raises(ProblemError) as caught:
        preflight(path)
    message = str(caught.value)
    assert message.startswith(f"{path}:{line}:") and cause in message, message
    assert "\n" not in message


def test_a_hang_is_cut_off_and_named(tmp_path: Path) -> None:
    path = tmp_path / "hangs.py"
    path.write_text(HEAD + "import time\n\ntime.sleep(3600)\n" + TAIL)
    with pytest.raises(ProblemError) as caught:
        # the child's watchdog fires 2 s before the limit: 6 s leave it 3 times the ~2 s
        # the child takes to reach the hang (imports), and the test waits no longer
        preflight(path, seconds=8)
    message = str(caught.value)
    assert message.startswith(f"{path}:5:") and "within 8 s" in message, message


def test_a_good_problem_and_candidate_pass(tmp_path: Path) -> None:
    tests = ROOT / "tests"
    preflight(
        tests / "problems" / "gates" / "swish_bias.py",
        tests / "fixtures" / "candidates" / "gates" / "swish_fused.py",
        confine=confine_preflight,
    )
    preflight(ROOT / "problems" / "triton" / "001_add_relu.py")


def test_a_candidate_is_built_from_the_problems_init_inputs(tmp_path: Path) -> None:
    cand = tmp_path / "cand.py"
    cand.write_text(
        HEAD + "\n\nclass ModelNew(nn.Module):\n    def __init__(self):\n"
        "        super().__init__()\n\n    def forward(self, x):\n        return x\n"
    )
    problem = ROOT / "tests" / "problems" / "gates" / "swish_bias.py"  # Model(d, scale)
    with pytest.raises(ProblemError) as caught:
        preflight(problem, cand, confine=confine_preflight)
    assert str(caught.value).startswith(f"{cand}:") and "ModelNew(*get_init_inputs())" in str(
        caught.value
    )


def test_optimize_submits_nothing_for_a_file_that_raises(tmp_path: Path) -> None:
    settings = make_settings(tmp_path / "home")
    path = tmp_path / "raises.py"
    path.write_text(CASES["raises_at_import"][0])
    done = run_cli(["optimize", str(path), "--no-follow"], {**env_for(settings), "COLUMNS": "300"})
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and f"{path}:4:" in lines[0] and "ZeroDivisionError" in lines[0]
    assert not (settings.server_dir / "server.pid").exists()


CUDA_PROBLEM = ROOT / "tests" / "problems" / "identity" / "cuda_built_inputs.py"


def test_a_problem_that_makes_cuda_tensors_is_imported_and_left_to_the_gpu(
    tmp_path: Path,
) -> None:
    """The check runs CPU-only (on a GPU host too), so ``.cuda()`` in get_inputs is no fault of
    the file: it passes, saying what it left unchecked; a broken candidate is still named."""
    assert "checked on the GPU" in preflight(CUDA_PROBLEM)
    assert preflight(ROOT / "tests" / "problems" / "gates" / "swish_bias.py") == ""
    cand = tmp_path / "cand.py"
    cand.write_text(HEAD + "\nSCALE = 1 / 0\n")
    with pytest.raises(ProblemError) as caught:
        preflight(CUDA_PROBLEM, cand, confine=confine_preflight)
    assert str(caught.value).startswith(f"{cand}:4:") and "ZeroDivisionError" in str(caught.value)
    other_failure = tmp_path / "not_cuda.py"  # a failure of its own is still the file's
    other_failure.write_text(CUDA_PROBLEM.read_text().replace(".cuda()", ".view(-1, 0)"))
    with pytest.raises(ProblemError):
        preflight(other_failure)


def test_verify_on_the_cpu_says_a_cuda_only_problem_needs_a_gpu(tmp_path: Path) -> None:
    cand = tmp_path / "identity.py"
    cand.write_text(CUDA_PROBLEM.read_text() + "\n\nModelNew = Model\n")
    done = run_cli(
        ["verify", str(CUDA_PROBLEM), "--candidate", str(cand), "--device", "cpu"],
        {**env_for(make_settings(tmp_path / "home")), "COLUMNS": "300"},
    )
    assert done.returncode == 2
    assert "builds its model or inputs on CUDA" in done.stdout + done.stderr
    assert "--device cuda" in done.stdout + done.stderr


def test_a_module_beside_the_file_is_named_as_one_that_does_not_travel(tmp_path: Path) -> None:
    (tmp_path / "helpers.py").write_text("def scale(x):\n    return 2 * x\n")
    path = tmp_path / "uses_helpers.py"
    path.write_text(HEAD + "from helpers import scale\n" + TAIL)
    with pytest.raises(ProblemError) as caught:
        preflight(path)
    message = str(caught.value)
    assert message.startswith(f"{path}:3:") and "No module named 'helpers'" in message
    assert "'helpers' sits beside the file" in message and "travels as one file" in message
    (tmp_path / "helpers.py").unlink()  # a module missing everywhere gets no such hint
    with pytest.raises(ProblemError) as caught:
        preflight(path)
    assert "sits beside" not in str(caught.value)


def test_a_candidate_is_imported_only_inside_the_sandbox(tmp_path: Path) -> None:
    """Its import runs its code before any gate or cache-guard window: it must see no project
    file to rewrite, no home, no compiler cache of the host's, and no network."""
    cand = tmp_path / "probe.py"
    cand.write_text(
        HEAD
        + "import os, pathlib\n"
        + f"SEEN = [p for p in ({str(ROOT / 'gates' / 'cascade.py')!r}, {str(tmp_path)!r} + '/x')\n"
        + "        if os.access(p, os.W_OK) or os.access(os.path.dirname(p), os.W_OK)]\n"
        + "assert not SEEN, f'writable: {SEEN}'\n"
        + "assert 'torchinductor' not in os.environ.get('TORCHINDUCTOR_CACHE_DIR', '')\n"
        + "assert os.environ.get('HOME') == '/tmp'\n"
        + "\n\nclass ModelNew(nn.Module):\n    def __init__(self, d, scale):\n"
        "        super().__init__()\n\n    def forward(self, x):\n        return x\n"
    )
    problem = ROOT / "tests" / "problems" / "gates" / "swish_bias.py"
    assert preflight(problem, cand, confine=confine_preflight) == ""
    with pytest.raises(TypeError, match="untrusted"):
        preflight(problem, cand)  # never unconfined


def test_a_campaign_is_refused_inputs_whose_shape_follows_the_seed(tmp_path: Path) -> None:
    """One compiled forward serves every gate seed: said before submission, where `verify`
    (eager candidates, any shapes) still takes the file."""
    path = tmp_path / "varying.py"
    path.write_text(
        HEAD
        + "import random\n"
        + TAIL.replace("torch.randn(4)", "torch.randn(random.randint(2, 60))")
    )
    assert preflight(path) == ""
    with pytest.raises(ProblemError, match="other inputs under other seeds: input 0 is a tensor"):
        preflight(path, one_shape=True)
    fixed = tmp_path / "fixed.py"
    fixed.write_text(HEAD + TAIL)
    assert preflight(fixed, one_shape=True) == ""
