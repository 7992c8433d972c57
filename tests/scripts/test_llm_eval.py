"""scripts/llm_eval (``python -m scripts.llm_eval``): the reply-folder evaluation, one short call per reply round.

* A whole evaluation on the CPU, for real (slow, ~110 s on 2 busy cores): the real
  embedded Temporal server, the real CPU worker ``kernelopt optimize`` starts, and the
  GPU activity doubles of ``tests/support/gpu_doubles.py`` as the harness's
  ``--extra-worker``.  ``start`` runs without any GPU worker (the campaigns wait at
  compile, and the call ends); every later call is ``resume`` in a FRESH
  ``KERNELOPT_HOME`` (the last one deleted: the home moves between calls), first with
  no replies, then with the replies scripted in ``tests/support/llm_replies.py`` (and one
  that answers nothing); the campaigns go compile -> plan -> execute -> summarize ->
  finished, and ``report`` writes the table from the last ``home.tgz``.
* A thin home (fast): the compile's seed-drawn tensors stay out of ``home.tgz`` and
  are drawn again after the import to the digests the H200 capture recorded
  (``kernelopt state export --thin``: tests/kernelopt/cli/test_state_thin.py).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import sqlite3
import subprocess
import sys
import tarfile
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from kernelopt.compile.runtime import save_tensors
from kernelopt.contracts.compiled import CompileResult
from kernelopt.pidfile import process_alive
from kernelopt.state_transfer import DB_NAME, import_state, read_manifest
from kernelopt.store import open_store
from kernelopt.thin_home import REDRAWN_FIELDS, redraw_left_out, seed_tensors
from scripts.llm_eval.packing import NCU_REF, export_home
from scripts.llm_eval.replies import request_of
from scripts.llm_eval.stream import Stream
from scripts.llm_eval.watch import SETTLED
from tests.support.llm_replies import reply_source
from tests.support.paths import ROOT
from tests.support.temporal import env_for, make_settings

PROBLEMS = ["problems/level1/001_relu_chain.py", "problems/level1/009_softmax_rows.py"]
FIXTURE = ROOT / "tests" / "fixtures" / "wrappers" / "level3_002_transformer_block.compile.json"
STAND_IN = f"{sys.executable} -m tests.support.run_worker gpu {{gpu_queue}}"


def _env(home: Path) -> dict[str, str]:
    return env_for(make_settings(home)) | {"KERNELOPT_DOUBLES_DELAY": "0.05"}


def harness(home: Path, *args: str) -> subprocess.CompletedProcess:
    done = subprocess.run(
        [sys.executable, "-m", "scripts.llm_eval", *args],
        cwd=ROOT,
        env=_env(home),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done


def harness_process(home: Path, *args: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "scripts.llm_eval", *args],
        cwd=ROOT,
        env=_env(home),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def requests_in(out: Path) -> list[dict]:
    with tarfile.open(out / "requests.tgz") as tar:
        return [json.load(tar.extractfile(m)) for m in tar.getmembers()]


def answer(request: dict) -> str:
    """What an independent model might write: plans, one kernel per plan, no lessons."""
    if request["role"] == "plan":
        r = request["round"]
        return json.dumps(
            {
                "plans": [
                    {"direction": f"fuse r{r}", "description": "one streaming pass"},
                    {"direction": f"narrow r{r}", "description": "one warp per row"},
                ]
            }
        )
    if request["role"] == "summarize":
        return '{"entries": []}'
    tag = "relu_chain" if "relu_chain" in request["campaign_id"] else "softmax_rows"
    plan = "slower" if "narrow" in request["messages"][-1]["content"] else "good"
    module = reply_source(tag, plan)
    return f"```python\n{module}\n# {request['request_id']}\n```\n"


def write_replies(requests: list[dict], folder: Path) -> Path:
    folder.mkdir(parents=True)
    for request in requests:
        (folder / f"{request['request_id']}.txt").write_text(answer(request))
    (folder / "unrelated-id.txt").write_text("a reply nobody asked for")
    return folder


def events(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "progress.jsonl").read_text().splitlines()]


@pytest.mark.slow
def test_an_evaluation_moves_home_every_call_until_both_campaigns_finish(tmp_path: Path):
    # no GPU worker in the first call (a CPU machine): both campaigns wait at compile
    out = tmp_path / "gpu-less"
    harness(
        tmp_path / "home-1",
        "start",
        "--problems",
        *PROBLEMS,
        "--rounds",
        "1",
        "--retries",
        "0",
        "--mode",
        "single",
        "--budget-s",
        "200",
        "--out",
        str(out),
    )
    assert read_manifest(out / "home.tgz").server == "stopped"  # packed after a clean stop
    assert requests_in(out) == []
    summary = json.loads((out / "summary.json").read_text())
    assert summary["stopped"] == SETTLED
    assert sorted(summary["states"].values()) == ["waiting for a GPU worker (compile)"] * 2
    assert "| 001_relu_chain |" in (out / "progress.md").read_text()

    # the same home, moved, with a GPU worker: compiled, triaged, profiled, asked to plan
    previous, out = out, tmp_path / "out0"
    harness(
        tmp_path / "home0",
        "resume",
        "--home",
        str(previous / "home.tgz"),
        "--budget-s",
        "200",
        "--out",
        str(out),
        "--extra-worker",
        STAND_IN,
    )
    assert sorted(r["role"] for r in requests_in(out)) == ["plan", "plan"]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["stopped"] == SETTLED
    assert sorted(summary["states"].values()) == ["waiting for 1 plan"] * 2
    # resumed again without the replies (a stale home.tgz): refused before any service starts
    stale = ["resume", "--home", str(out / "home.tgz"), "--out", str(tmp_path / "out-idle")]
    idle = subprocess.run(
        [sys.executable, "-m", "scripts.llm_eval", *stale],
        cwd=ROOT,
        env=_env(tmp_path / "home-idle"),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert idle.returncode == 2 and "no reply was given" in idle.stderr, idle.stderr[-2000:]
    assert "server_started" not in (tmp_path / "out-idle" / "progress.jsonl").read_text()

    # a call cut at its time limit: SIGKILLed after its first live snapshot, it leaves its
    # server and workers running (sessions of their own); the next call resumes from the
    # snapshot with the same replies and stops those leftovers first
    replies = write_replies(requests_in(out), tmp_path / "replies-cut")
    cut = tmp_path / "out-cut"
    args = ["resume", "--home", str(out / "home.tgz"), "--replies", str(replies)]
    args += ["--snapshot-s", "1", "--out", str(cut), "--extra-worker", STAND_IN]
    killed = harness_process(tmp_path / "home-cut", *args)
    try:
        deadline = time.monotonic() + 120
        while not (cut / "progress.jsonl").is_file() or "snapshot" not in [
            e["event"] for e in events(cut)
        ]:
            assert killed.poll() is None and time.monotonic() < deadline, killed.communicate()
            time.sleep(0.2)
    finally:
        killed.kill()
        killed.wait(30)
    (server,) = [e["pid"] for e in events(cut) if e["event"] == "server_started"]
    assert process_alive(server)
    shutil.rmtree(tmp_path / "home0")
    out, home = tmp_path / "out-after-cut", tmp_path / "home-after-cut"
    harness(
        home,
        *["resume", "--home", str(cut / "home.tgz"), "--replies", str(replies)],
        *["--budget-s", "200", "--out", str(out), "--extra-worker", STAND_IN],
    )
    (stopped,) = [e for e in events(out) if e["event"] == "leftovers_stopped"]
    assert stopped["home"] == str(tmp_path / "home-cut") and stopped["server"] is True
    assert stopped["workers"] == ["cpu"] and stopped["extra"] == [True]
    assert not process_alive(server)
    shutil.rmtree(tmp_path / "home-cut")
    assert sorted(r["role"] for r in requests_in(out)) == ["execute"] * 4

    # each resume: a fresh home (the last one deleted), the last call's replies, one step on
    for call, waiting in enumerate((["summarize"] * 2, []), 1):
        previous, out = out, tmp_path / f"out{call}"
        replies = write_replies(requests_in(previous), tmp_path / f"replies{call}")
        shutil.rmtree(home)
        home = tmp_path / f"home{call}"
        harness(
            home,
            *["resume", "--home", str(previous / "home.tgz"), "--replies", str(replies)],
            *["--budget-s", "200", "--out", str(out), "--extra-worker", STAND_IN],
        )
        assert sorted(r["role"] for r in requests_in(out)) == waiting
        seen = events(out)
        delivered = [e["id"] for e in seen if e["event"] == "reply_delivered"]
        assert sorted(delivered) == sorted(r["request_id"] for r in requests_in(previous))
        skipped = [e["file"] for e in seen if e["event"] == "reply_skipped"]
        assert skipped == ["unrelated-id.txt"]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["all_finished"] and sorted(summary["states"].values()) == ["finished"] * 2
    # the last call's own row in its progress.md: how it ended, not "(this call)" nor "cut?"
    row = (out / "progress.md").read_text().splitlines()[-1]
    assert row.startswith("| 6 | resume |") and row.endswith(f"| {SETTLED} |")

    report = tmp_path / "report"
    harness(tmp_path / "unused", "report", "--home", str(out / "home.tgz"), "--out", str(report))
    data = json.loads((report / "report.json").read_text())
    calls = data["manifest"]["calls"]
    assert [c["command"] for c in calls] == ["start"] + ["resume"] * 5
    assert calls[2]["stopped"].startswith("cut? last live snapshot at")  # as its snapshot says
    rows = {r["problem"]: r for r in data["rows"]}
    assert sorted(rows) == ["001_relu_chain", "009_softmax_rows"]
    for row in rows.values():
        assert row["status"] == "completed" and row["outcome"] in ("optimized", "fallback")
        # one round of two plans: two executor replies, both parsed and compiled (the
        # doubles fail a third of the candidates at correctness, by their source's hash)
        assert (row["candidates"], row["replies"], row["parsed"], row["compiled"]) == (2, 2, 2, 2)
        assert row["passed_1_2"] == row["correct"] <= 2
        assert row["llm"] == {
            "execute": {"asked": 2, "answered": 2},
            "plan": {"asked": 1, "answered": 1},
            "summarize": {"asked": 1, "answered": 1},
        }
        assert row["tokens"] > 0 and row["gpu_seconds"] > 0
    table = (report / "report.md").read_text()
    assert "| 001_relu_chain | completed |" in table and "| 6 | resume |" in table

    # the same home's activity timeline: every step of both campaigns, in start order
    timeline = tmp_path / "timeline.md"
    harness(
        tmp_path / "unused", "timeline", "--home", str(out / "home.tgz"), "--out", str(timeline)
    )
    steps = [line.split("|") for line in timeline.read_text().splitlines() if line.startswith("| ")]
    starts = [float(cells[1]) for cells in steps[1:] if cells[1].strip()[0].isdigit()]
    assert starts == sorted(starts) and len(starts) >= 10
    activities = {cells[4].strip() for cells in steps[1:]}
    assert {"compile", "gate_candidate"} <= activities  # folder-mode replies come as signals
    assert "GPU-queue activities:" in timeline.read_text()


class _Site:
    """The call's server and workers, doubled: nothing to start or stop."""

    def __init__(self, *args: object) -> None:
        self.client: object | None = None

    async def up(self, gpu_queue: str) -> object:
        self.client = object()
        return self.client

    def stop_workers(self) -> None:
        pass

    def stop_server(self) -> None:
        pass


def _one_call(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, loop: Callable) -> list:
    """``run_call`` with its services doubled: ``loop`` stands for the watch loop (a live
    snapshot is due at once), and each home.tgz export keeps the manifest it would pack."""
    from scripts.llm_eval import commands, packing
    from scripts.llm_eval.record import EvalManifest, load_manifest

    settings = make_settings(tmp_path / "home")
    exported: list[EvalManifest] = []

    def export(settings, work, stream, all_finished, diagnostics=frozenset()) -> int:
        exported.append(load_manifest(settings))
        return 1

    async def no_refs(client, manifest) -> set[str]:
        return set()

    async def no_rows(client, settings, manifest) -> list[dict]:
        return []

    async def prepare(client, call) -> EvalManifest:
        return EvalManifest(created_at="now", rounds=1, options={})

    for module in (commands, packing):
        monkeypatch.setattr(module, "export_home", export)
        monkeypatch.setattr(module, "diagnostic_refs", no_refs)
    monkeypatch.setattr(commands, "Site", _Site)
    monkeypatch.setattr(commands, "run_until_settled", loop)
    monkeypatch.setattr(commands, "report_rows", no_rows)
    monkeypatch.setattr(commands, "pack_requests", lambda settings, stream, work: [])
    monkeypatch.setattr(commands, "pack_logs", lambda settings, stream, work: None)
    args = argparse.Namespace(budget_s=60.0, extra_worker=[], snapshot_s=0.01)
    stream = Stream(tmp_path / "out")
    try:
        asyncio.run(commands.run_call("resume", args, settings, stream, tmp_path, prepare))
    finally:
        stream.close()
    return exported


def _calls_row(out: Path) -> str:
    return (out / "progress.md").read_text().splitlines()[-1]


def test_a_call_that_ends_normally_after_a_live_snapshot_says_how_it_ended(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    async def loop(client, manifest, settings, gpu_queue, stream, deadline, stop, snapshot, site):
        await snapshot.maybe(time.monotonic() + 1)
        return SETTLED, []

    live, final = _one_call(tmp_path, monkeypatch, loop)
    # a call cut after its snapshot is packed as the snapshot says ...
    assert live.calls[-1].stopped.startswith("cut? last live snapshot at")
    # ... but this one ended: progress.md, summary.json and the final home.tgz say how
    (call,) = final.calls
    assert call.stopped == SETTLED and call.seconds >= live.calls[-1].seconds
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert (summary["stopped"], summary["seconds"]) == (SETTLED, call.seconds)
    assert _calls_row(tmp_path / "out").endswith(f"| {call.seconds:.0f} | 0 | 0 | {SETTLED} |")


def test_a_call_that_fails_after_a_live_snapshot_says_it_failed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    async def loop(client, manifest, settings, gpu_queue, stream, deadline, stop, snapshot, site):
        await snapshot.maybe(time.monotonic() + 1)
        raise RuntimeError("the server went away")

    with pytest.raises(RuntimeError):
        _one_call(tmp_path, monkeypatch, loop)
    assert _calls_row(tmp_path / "out").endswith("| failed: RuntimeError |")


def test_a_reply_file_names_its_request_by_the_longest_id():
    ids = {"c-k0-i0-plan-001-ab", "c-k0-i0-plan-001-ab.x"}
    assert request_of("c-k0-i0-plan-001-ab.txt", ids) == "c-k0-i0-plan-001-ab"
    assert request_of("c-k0-i0-plan-001-ab.x.md", ids) == "c-k0-i0-plan-001-ab.x"
    assert request_of("c-k0-i0-plan-001-ab", ids) == "c-k0-i0-plan-001-ab"
    assert request_of("c-k0-i0-plan-001-abc.txt", ids) is None


def test_raw_ncu_reports_are_found_in_history_payloads_as_the_converter_writes_them():
    from temporalio.api.history.v1 import HistoryEvent
    from temporalio.contrib.pydantic import pydantic_data_converter

    from kernelopt.contracts import ArtifactRef
    from kernelopt.contracts.search import KernelProfile

    ncu = ArtifactRef(sha256="ab" * 32, size=3 << 20, media_type="application/x-ncu-rep")
    other = ArtifactRef(sha256="cd" * 32, size=10, media_type="text/x-python")
    profile = KernelProfile(source="ncu", raw_report=ncu, note="n")
    (payload,) = pydantic_data_converter.payload_converter.to_payloads([[profile, other]])
    event = HistoryEvent()
    event.activity_task_completed_event_attributes.result.payloads.append(payload)
    found = NCU_REF.findall(event.SerializeToString())
    assert [m.decode() for m in found] == ["ab" * 32]


def test_a_thin_home_leaves_seed_tensors_behind_and_draws_them_again(tmp_path: Path):
    """The H200 capture's args, inputs and init inputs of a problem, left out of home.tgz
    and drawn again after the import on this machine, to the digests recorded there."""
    recorded = CompileResult.model_validate_json(FIXTURE.read_text())
    settings = make_settings(tmp_path / "a")
    (settings.home / "server").mkdir(parents=True)
    with sqlite3.connect(settings.home / DB_NAME) as db:
        db.execute("CREATE TABLE executions (id TEXT)")
    store = open_store(settings.artifacts_dir)
    source = (ROOT / "problems" / "level3" / "002_transformer_block.py").read_text()
    assert store.put_text(source, "text/x-python").sha256 == recorded.problem.source.sha256
    drawn = seed_tensors(recorded, store)
    for field in REDRAWN_FIELDS:  # the blobs a compile on the H200 wrote
        assert save_tensors(store, drawn[field], field).sha256 == getattr(recorded, field).sha256
    (settings.home / "compile_cache").mkdir()
    (settings.home / "compile_cache" / f"{recorded.cache_key}.json").write_text(FIXTURE.read_text())
    stream = Stream(tmp_path / "out")
    work = tmp_path / "work"
    work.mkdir()

    size = export_home(settings, work, stream, all_finished=False)
    stream.close()
    manifest = read_manifest(tmp_path / "out" / "home.tgz")
    tensors = sum(getattr(recorded, f).size for f in REDRAWN_FIELDS)
    assert tensors > 15 << 20 and size < 1 << 20
    assert sorted(manifest.left_out) == sorted(
        f"artifacts/{getattr(recorded, f).sha256[:2]}/{getattr(recorded, f).sha256}"
        for f in REDRAWN_FIELDS
    )
    moved = make_settings(tmp_path / "b")
    import_state(moved, tmp_path / "out" / "home.tgz")
    moved_store = open_store(moved.artifacts_dir)
    assert not moved_store.exists(recorded.args)
    assert redraw_left_out(moved).blobs == len(REDRAWN_FIELDS)
    for field in REDRAWN_FIELDS:
        assert moved_store.exists(getattr(recorded, field))


@pytest.mark.parametrize("proposer", ["llm", "builtin"])
def test_start_builds_the_campaign_for_the_proposer_asked(
    proposer: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--proposer builtin`` carries a built-in campaign through the same calls (issue 31)."""
    from kernelopt.config import Settings
    from scripts.llm_eval.commands import build_parser, campaign_options_for

    monkeypatch.setenv("KERNELOPT_HOME", str(tmp_path))
    argv = ["start", "--problems", "p.py", "--proposer", proposer]
    args = build_parser().parse_args(argv)
    options = campaign_options_for(args, Settings.from_env(llm_mode="folder"))
    assert options.proposer.kind == proposer
