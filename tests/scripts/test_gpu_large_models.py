"""scripts/gpu_large_models.py: what a model's run leaves behind, finished or cut, on the CPU.

The children here run stand-in stages (``child_main`` with a ``stages`` function of the
test's own) instead of a real compile, which needs the GPU: one finishes, one fails, one
sleeps past its timeout with a worker process of its own, as ResNet-50's compile ran past
the device's call limit.
"""

from __future__ import annotations

import json
import signal
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from scripts import gpu_large_models as large

CHILD = """
import subprocess, sys, time
from pathlib import Path
from scripts.gpu_large_models import child_main

def stages(path, home, progress):
    progress("start", model=path.stem, inductor={"compile_threads": 1})
    progress("compile start")
    sys.stderr.write('KERNELOPT_PROGRESS {"step": "default_mode"}\\n')
    sys.stderr.flush()
    if path.stem == "fails":
        raise ValueError("no wrapper")
    if path.stem == "sleeps":  # a compile worker of its own, holding our stdout open too
        worker = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])
        progress("worker", pid=worker.pid)
        time.sleep(300)
    progress("compile end", seconds=0.0)
    return {"model": path.stem, "kernels": 3}

child_main(Path(sys.argv[1]), stages)
"""


def _command(model: str) -> list[str]:
    return [sys.executable, "-u", "-c", CHILD, f"{model}.py"]


def _progress(out: Path, model: str) -> list[dict[str, Any]]:
    text = (out / f"large_models.{model}.progress.jsonl").read_text()
    return [json.loads(line) for line in text.splitlines()]


def _running(pid: int) -> bool:
    """Alive and not a zombie (an orphan's reaper may be slow to reap it)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


def test_a_finished_child_gives_its_row_and_a_line_per_stage(tmp_path: Path) -> None:
    row = large.run_model(Path("done.py"), tmp_path, timeout=60, command=_command("done"))
    assert row == {"model": "done", "kernels": 3}
    lines = _progress(tmp_path, "done")
    assert [line["stage"] for line in lines] == ["start", "compile start", "compile end"]
    assert lines[0]["inductor"] == {"compile_threads": 1}
    for line in lines:
        assert line["elapsed_s"] >= 0 and line["peak_rss_gib"] > 0


def test_a_failed_child_points_at_its_log(tmp_path: Path) -> None:
    row = large.run_model(Path("fails.py"), tmp_path, timeout=60, command=_command("fails"))
    assert row["error"] == "exit 1: ValueError: no wrapper (the log: large_models.fails.log)"
    assert row["last_stage"] == "compile start"
    assert row["log"] == "large_models.fails.log"
    assert "Traceback" in row["log_tail"] and "Traceback" in (tmp_path / row["log"]).read_text()


def test_a_child_past_its_timeout_dumps_its_stacks_and_is_killed_with_its_workers(
    tmp_path: Path,
) -> None:
    started = time.monotonic()
    child = large.ModelChild("sleeps", tmp_path)
    child.run(_command("sleeps"), timeout=4, grace=1)
    assert time.monotonic() - started < 4 + 1 + 8  # the worker's pipe did not hold us
    assert child.timed_out and child.returncode == -signal.SIGKILL
    lines = _progress(tmp_path, "sleeps")  # written as they came, before the kill
    assert [line["stage"] for line in lines] == ["start", "compile start", "worker"]
    deadline = time.monotonic() + 10
    while _running(lines[-1]["pid"]) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _running(lines[-1]["pid"])
    log = (tmp_path / "large_models.sleeps.log").read_text()
    assert "most recent call first" in log and "in stages" in log  # faulthandler's dump
    row = child.row(timeout=4)
    assert row["error"] == (
        "the model did not finish within 4 s; last stage: worker (compile step: default_mode); "
        "all threads' stacks are in large_models.sleeps.log"
    )


def test_the_stage_a_killed_child_was_in_names_the_error(tmp_path: Path) -> None:
    child = large.ModelChild("resnet", tmp_path)
    child.timed_out, child.returncode, child.last_stage = True, -9, "compile start"
    assert child.row(timeout=520)["error"] == (
        "compile did not finish within 520 s; last stage: compile start; "
        "all threads' stacks are in large_models.resnet.log"
    )


def test_the_table_is_written_after_every_model(tmp_path: Path) -> None:
    seen: list[list[dict[str, Any]]] = []

    def run(path: Path, out: Path, timeout: float) -> dict[str, Any]:
        written = out / "large_models.json"
        seen.append(json.loads(written.read_text()) if written.is_file() else [])
        return {"model": path.stem, "error": f"compile did not finish within {timeout:g} s"}

    rows = large.run_all([Path("a.py"), Path("b.py")], tmp_path, "", 5.0, run)
    assert seen == [[], rows[:1]]  # a's row was written before b ran
    assert json.loads((tmp_path / "large_models.json").read_text()) == rows
    assert "| b | error: compile did not finish within 5 s |" in (
        (tmp_path / "large_models.md").read_text()
    )


def test_the_first_line_names_the_inductor_settings_before_the_compile_starts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def compile_problem(*args: Any) -> None:
        raise TimeoutError("stands for a compile that never ends")

    monkeypatch.setattr("kernelopt.kinds.registry.compile_problem", compile_problem)
    monkeypatch.setenv("TORCHINDUCTOR_COMPILE_THREADS", "3")
    problem = large.MODELS[0]
    with pytest.raises(TimeoutError):
        large.measure(problem, tmp_path, large.Progress())
    out = capsys.readouterr().out.splitlines()
    lines = [json.loads(line.removeprefix(large.PROGRESS)) for line in out]
    assert [line["stage"] for line in lines] == ["start", "compile start"]
    settings = lines[0]["inductor"]
    assert settings["mode"] == "max-autotune-no-cudagraphs"
    assert settings["env"]["TORCHINDUCTOR_COMPILE_THREADS"] == "3"
    assert set(large.INDUCTOR_KEYS) <= set(settings["config"])
    # the mode turns autotuning on whatever this process's config says
    assert settings["effective"]["max_autotune"] is True
    assert settings["cpus"] >= 1


def test_payloads_are_measured_as_campaigns_send_them_and_as_they_were_inline(
    tmp_path: Path,
) -> None:
    """On the H200, ResNet-50's inline campaign state read 979 KiB; what a campaign carries
    since segmentation, triage and scope go by reference is what the table must show."""
    from kernelopt.contracts.compiled import CompileResult, SegmentResult, TriageResult
    from kernelopt.store import open_store

    fixtures = Path(__file__).resolve().parents[1] / "fixtures" / "wrappers"
    name = "level3_002_transformer_block"
    compiled = CompileResult.model_validate_json((fixtures / f"{name}.compile.json").read_text())
    seg = SegmentResult.model_validate_json((fixtures / f"{name}.segment.json").read_text())
    tri = TriageResult.model_validate_json((fixtures / f"{name}.triage.json").read_text())
    sizes = large.payload_kib(compiled, seg, tri, compiled.problem.source, open_store(tmp_path))
    assert {"campaign state", "search input", "gate input", "inline: campaign state"} <= set(sizes)
    assert sizes["campaign state"] < sizes["inline: campaign state"] / 4
    assert sizes["search input"] < sizes["inline: search input, scoped"]
