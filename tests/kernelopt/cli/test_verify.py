"""``kernelopt verify``: exit codes and the JSON shape (CPU: the interpreter, no speed verdict)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from kernelopt.cli.verify import verify_command

TESTS = Path(__file__).resolve().parents[2]
PROBLEM = TESTS / "problems" / "gates" / "swish_bias.py"
CANDIDATES = TESTS / "fixtures" / "candidates" / "gates"


def test_accepted_candidate_exits_0_with_json(
    capsys: pytest.CaptureFixture[str], cpu_launcher: bool
) -> None:
    code = verify_command(PROBLEM, CANDIDATES / "swish_fused.py", True, device="cpu")
    out = json.loads(capsys.readouterr().out)
    assert code == 0 and out["accepted"] is True
    gates = [v["gate"] for v in out["verdicts"]]
    assert gates == ["static", "correctness", "model", "performance"]
    assert out["verdicts"][2]["metrics"]["sets"][0]["d_ref"] is not None
    perf = out["verdicts"][3]
    assert "no speed verdict on the CPU" in perf["reason"] and out["speedup"] is None
    assert all(c["ok"] and c["calls"] >= 10 for c in perf["metrics"]["checked_calls"])


def test_cpu_verify_runs_the_checked_timing_loop_and_catches_a_late_cheat(
    capsys: pytest.CaptureFixture[str], cpu_launcher: bool
) -> None:
    code = verify_command(PROBLEM, CANDIDATES / "late_cheat.py", True, device="cpu")
    out = json.loads(capsys.readouterr().out)
    assert code == 1 and out["deciding_gate"] == "performance"
    assert "timed call #" in out["reason"]


def test_many_candidates_share_one_reference_and_get_a_row_each(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], cpu_launcher: bool
) -> None:
    from kernelopt.cli.verify import verify_many_command

    folder = tmp_path / "cands"
    folder.mkdir()
    for name in ("swish_fused", "lazy_output"):
        (folder / f"{name}.py").write_text((CANDIDATES / f"{name}.py").read_text())
    (folder / "broken.py").write_text("x = 1\n")  # neither ModelNew nor launch()
    code = verify_many_command(PROBLEM, [folder], True, device="cpu", run_perf=False)
    rows = json.loads(capsys.readouterr().out)
    by_name = {Path(r["candidate"]).name: r for r in rows}
    assert code == 1 and sorted(by_name) == ["broken.py", "lazy_output.py", "swish_fused.py"]
    assert by_name["swish_fused.py"]["accepted"]
    assert by_name["lazy_output.py"]["deciding_gate"] == "correctness"
    assert "bad candidate" in by_name["broken.py"]["reason"]
    assert (
        len({r["environment"].get("seeds", {}).get("heldout") for r in rows if r["verdicts"]}) == 1
    )


def test_rejected_candidate_exits_1_with_a_table(
    capsys: pytest.CaptureFixture[str], cpu_launcher: bool
) -> None:
    code = verify_command(PROBLEM, CANDIDATES / "partial_write.py", False, device="cpu")
    text = capsys.readouterr().out
    assert code == 1
    assert "REJECTED at correctness" in text and "never written" in text


def test_broken_problem_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("import torch\n")  # no Model
    code = verify_command(bad, CANDIDATES / "swish_fused.py", True, device="cpu")
    out = json.loads(capsys.readouterr().out)
    assert code == 2 and out["could_not_run"] is True


def test_problem_that_cannot_run_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], cpu_launcher: bool
) -> None:
    bad = tmp_path / "raises.py"
    bad.write_text(
        "import torch\nimport torch.nn as nn\n\n"
        "class Model(nn.Module):\n    def forward(self, x):\n        raise ValueError('no')\n\n"
        "def get_inputs():\n    return [torch.randn(4)]\n\n"
        "def get_init_inputs():\n    return []\n"
    )
    code = verify_command(bad, CANDIDATES / "gelu_erf.py", True, device="cpu")
    out = json.loads(capsys.readouterr().out)
    assert code == 2 and "reference could not run" in out["reason"]


def test_missing_gpu_is_could_not_run(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import kernelopt.cli.verify as cli

    monkeypatch.setattr(cli, "_cuda_available", lambda: False)
    code = verify_command(PROBLEM, CANDIDATES / "swish_fused.py", True)
    assert code == 2 and "no CUDA GPU" in json.loads(capsys.readouterr().out)["reason"]


BROKEN_INPUTS = (
    "import torch\nimport torch.nn as nn\n\n"
    "class Model(nn.Module):\n    def forward(self, x):\n        return x\n\n"
    "def get_inputs():\n    return [torch.randn(4, -1)]\n\n"
    "def get_init_inputs():\n    return []\n"
)


@pytest.mark.parametrize("many", [False, True], ids=["one", "batch"])
def test_a_problem_that_fails_its_check_is_named_before_no_gpu(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    many: bool,
) -> None:
    import kernelopt.cli.verify as cli

    bad = tmp_path / "bad_inputs.py"
    bad.write_text(BROKEN_INPUTS)
    monkeypatch.setattr(cli, "_cuda_available", lambda: False)
    candidate = CANDIDATES / "swish_fused.py"
    if many:
        code = cli.verify_many_command(bad, [candidate, candidate], True)
    else:
        code = cli.verify_command(bad, candidate, True)
    reason = json.loads(capsys.readouterr().out)["reason"]
    assert code == 2 and f"{bad}:9" in reason and "no CUDA GPU" not in reason


def test_a_batch_starts_its_zygote_while_the_problem_is_checked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The zygote's start (seconds on a GPU) overlaps the problem's CPU check; a problem
    that fails the check stops the batch before any reference runs and closes the zygote."""
    import contextlib

    import kernelopt.cli.verify as cli
    import kernelopt.cli.verify_batch as batch

    bad = tmp_path / "bad_inputs.py"
    bad.write_text(BROKEN_INPUTS)
    seen: list[str] = []

    @contextlib.contextmanager
    def launcher(device: str) -> Iterator[Callable[[], None]]:
        seen.append(f"zygote for {device}")
        yield lambda: None
        seen.append("zygote closed")

    def no_reference(*_: object) -> None:
        raise AssertionError("the reference ran for a problem that failed its check")

    monkeypatch.setattr(cli, "_cuda_available", lambda: True)
    monkeypatch.setattr(batch, "fast_launch_soon", launcher)
    monkeypatch.setattr(batch, "prepare_reference", no_reference)
    code = cli.verify_many_command(bad, [CANDIDATES / "swish_fused.py"], True)
    reason = json.loads(capsys.readouterr().out)["reason"]
    assert code == 2 and reason.startswith("bad problem file:") and f"{bad}:9" in reason
    assert seen == ["zygote for cuda", "zygote closed"]


def test_a_batch_without_candidate_files_stops_before_checking_the_problem(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The problem's check runs in a child that may take its whole time limit (a problem
    that hangs): an empty folder is answered at once, without starting it."""
    import kernelopt.cli.verify as cli

    def no_check(*_: object) -> None:
        raise AssertionError("the problem's check started for a batch without candidates")

    monkeypatch.setattr(cli, "_check_soon", no_check)
    (tmp_path / "empty").mkdir()
    code = cli.verify_many_command(PROBLEM, [tmp_path / "empty"], True)
    reason = json.loads(capsys.readouterr().out)["reason"]
    assert code == 2 and reason == "no candidate .py files found"
