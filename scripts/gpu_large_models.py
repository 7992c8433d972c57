"""Compile, segmentation, triage, memory and payload sizes of problems/large/ on the GPU (issue 31).

    source scripts/device_env.sh
    python3 -m scripts.gpu_large_models --out "$OUT"
    # -> $OUT/large_models.md (the table), large_models.json (every number)
    python3 -m scripts.gpu_large_models --out "$OUT" --model 001_resnet50 --timeout 520
    # one model, given up before the device's 10-minute call limit:
    # -> $OUT/large_models.001_resnet50.{md,json}

Each model runs in its own child process (so peak host memory is its own): the
compile step, segmentation and triage as a campaign's activities run them
(``compile_problem``, ``segment``, ``triage``), timed; then the kernel, launch,
library-call and target counts, f, the ceilings, triage's cut-off and the
targets it searches first, peak host RSS and peak GPU memory, and the size of
every payload a campaign sends for this model as Temporal's pydantic converter
encodes it: the compile result, the campaign state carried across
continue-as-new, one search's input and one gate call's input as campaigns send
them now (segmentation, triage, target plan and scope by reference), and the
inline shapes campaigns from before those patches carried.  A history grows by
about one gate input per candidate.

A run cut short still leaves what it saw.  As each model runs, the child's line at
every stage boundary (seconds since it started, peak RSS; the first line names the
Inductor settings the compile runs with) is appended to
``large_models.<model>.progress.jsonl`` and its stderr goes to
``large_models.<model>.log`` (the compile's own steps, ``KERNELOPT_PROGRESS``, are
there).  Past ``--timeout`` the child writes all its threads' Python stacks to that
log (SIGUSR1, ``faulthandler``), is killed with its own children, and its row says
which stage did not finish.  The .md and .json are written again after every model.
"""

from __future__ import annotations

import argparse
import contextlib
import faulthandler
import json
import os
import resource
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any, TypeVar

ROOT = Path(__file__).resolve().parents[1]
RESULT = "LARGE_MODEL_RESULT "  # the child's answer among compiler and log output
PROGRESS = "LARGE_MODEL_PROGRESS "  # the child's line at a stage boundary
COMPILE_STEP = "KERNELOPT_PROGRESS "  # kernelopt.checkpoint.PROGRESS_PREFIX: compile's steps
MODELS = sorted((ROOT / "problems" / "large").glob("[0-9][0-9][0-9]_*.py"))
STACK_GRACE_S = 5.0  # after SIGUSR1, before SIGKILL: the child writes its stacks
READER_JOIN_S = 10.0  # for the last lines of a child's stdout once it has ended
# the Inductor settings that decide how long a compile takes (autotuning, its worker pool)
INDUCTOR_KEYS = (
    "max_autotune",
    "max_autotune_gemm",
    "max_autotune_pointwise",
    "max_autotune_gemm_backends",
    "max_autotune_conv_backends",
    "coordinate_descent_tuning",
    "compile_threads",
    "autotune_in_subproc",
    "autotune_local_cache",
    "fx_graph_cache",
)
T = TypeVar("T")


class Progress:
    """The child's stage boundaries as lines on its stdout, flushed at once.

    The parent appends each to the model's progress file as it arrives, so a run
    killed at the device's call limit still shows how far it got and with how much memory.
    """

    def __init__(self) -> None:
        self.started = time.monotonic()

    def __call__(self, stage: str, **fields: Any) -> None:
        line = {"stage": stage, "elapsed_s": round(time.monotonic() - self.started, 1)}
        line |= peak_rss() | fields
        sys.stdout.write(PROGRESS + json.dumps(line, default=str) + "\n")
        sys.stdout.flush()


Stages = Callable[[Path, Path, Progress], dict[str, Any]]


def peak_rss() -> dict[str, float]:
    """Peak resident memory of this process, and of its children ended so far, in GiB."""
    kib_per_gib = 2**20  # ru_maxrss is in KiB on Linux
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return {
        "peak_rss_gib": round(own / kib_per_gib, 2),
        "peak_rss_children_gib": round(children / kib_per_gib, 2),
    }


def inductor_settings() -> dict[str, Any]:
    """The Inductor settings a compile here runs with: this process's config, the compile
    mode's patches on top of it, and the environment and CPUs behind them.

    ResNet-50's compile ran past 580 s on the H200; these say whether autotuning, its
    backends or the compile worker pool made it so.
    """
    import torch
    from torch._inductor import config

    from kernelopt.compile.modes import mode_options
    from kernelopt.contracts.compiled import CompileInput

    fields = CompileInput.model_fields
    mode = fields["mode"].default
    here = {key: getattr(config, key, None) for key in INDUCTOR_KEYS}
    patches = mode_options(mode)
    env = {"TORCHINDUCTOR_COMPILE_THREADS": None}
    env |= {k: v for k, v in sorted(os.environ.items()) if k.startswith("TORCHINDUCTOR_")}
    return {
        "mode": mode,
        "measure_default_mode": fields["measure_default_mode"].default,
        "config": here,
        "mode_patches": patches,
        "effective": here | patches,
        "env": env,
        "cpus": len(os.sched_getaffinity(0)),
        "torch": torch.__version__,
    }


def _stage(progress: Progress, name: str, run: Callable[[], T]) -> tuple[T, float]:
    """``run()`` between a start line and an end line: the one that has no end is the stage
    a killed run was in."""
    progress(f"{name} start")
    start = time.perf_counter()
    value = run()
    seconds = time.perf_counter() - start
    progress(f"{name} end", seconds=round(seconds, 2))
    return value, seconds


def _size(value: object) -> int:
    from temporalio.contrib.pydantic import pydantic_data_converter

    return pydantic_data_converter.payload_converter.to_payloads([value])[0].ByteSize()


def measure(path: Path, home: Path, progress: Progress) -> dict[str, Any]:
    """One model, in this process: every number of the table, a progress line per stage."""
    settings = inductor_settings()
    progress("start", model=path.stem, inductor=settings)
    import torch

    from kernelopt.compile.segment import segment
    from kernelopt.compile.triage import triage
    from kernelopt.contracts.compiled import CompileInput, SegmentInput, TriageInput
    from kernelopt.contracts.problem import ProblemSpec
    from kernelopt.kinds.registry import compile_problem
    from kernelopt.store import open_store

    store = open_store(home / "artifacts")
    source = store.put_text(path.read_text(), media_type="text/x-python", name=path.name)
    spec = ProblemSpec(name=f"large_{path.stem}", source=source, path=str(path))
    compiled, compile_s = _stage(
        progress, "compile", lambda: compile_problem(CompileInput(problem=spec), store)
    )
    seg, segment_s = _stage(
        progress, "segment", lambda: segment(SegmentInput(compiled=compiled), store)
    )
    tri, triage_s = _stage(
        progress, "triage", lambda: triage(TriageInput(compiled=compiled, segment=seg), store)
    )
    payloads, _ = _stage(
        progress, "payloads", lambda: payload_kib(compiled, seg, tri, source, store)
    )
    progress("payload sizes", payload_kib=payloads)
    return {
        "model": path.stem,
        "compile_s": round(compile_s, 1),
        "compile_stage_s": compiled.stage_seconds,
        "segment_s": round(segment_s, 2),
        "triage_s": round(triage_s, 1),
        "mode": seg.mode.value,
        "kernels": len(seg.kernels),
        "launches": sum(len(k.launches) for k in seg.kernels),
        "library_calls": len(seg.library_calls),
        # which kernels and library calls: what a count that moves between versions came from
        "launches_by_kernel": {k.name: len(k.launches) for k in seg.kernels},
        "library_calls_by_name": dict(Counter(call.name for call in seg.library_calls)),
        "fusion_groups": len(seg.fusion_groups),
        "targets": len(seg.targets),
        "eager_ms": compiled.eager_ms,
        "compiled_ms": compiled.compiled_ms,
        "f": round(tri.library_fraction, 4),
        "ceilings": tri.ceilings,
        "verdict": tri.verdict,
        "required_speedup": tri.required_speedup,
        "searched": len(tri.targets),
        "deferred": len(tri.deferred_targets),
        "deferred_share": round(tri.deferred_share, 4),
        "cutoff": tri.cutoff,
        "top_targets": [(t.id, round(t.share, 4)) for t in tri.targets[:10]],
        "peak_gpu_gib": round(torch.cuda.max_memory_allocated() / 2**30, 2),
        "peak_host_gib": peak_rss()["peak_rss_gib"],
        "payload_kib": payloads,
        "inductor": settings,
    }


def payload_kib(compiled: Any, seg: Any, tri: Any, source: Any, store: Any) -> dict[str, float]:
    """Every payload a campaign sends for this model, in KiB as Temporal encodes it: what
    campaigns carry now (segmentation, triage, target plan and a search's scope by
    reference), and the inline shapes of campaigns from before those patches."""
    from kernelopt.compile.segment_scope import scope_segment
    from kernelopt.compile.segment_store import store_scope, store_segment
    from kernelopt.compile.triage_store import store_plan, store_triage
    from kernelopt.contracts import CampaignState
    from kernelopt.contracts.search import SearchKernelInput
    from kernelopt.contracts.verdicts import CandidateGateInput

    payloads: dict[str, Any] = {
        "compile result": compiled,
        "campaign state": CampaignState(
            compiled=compiled,
            segment_ref=store_segment(seg, store),
            triage_ref=store_triage(tri, store),
            plan=store_plan(tri.targets, store),
        ),
    }
    inline = CampaignState(compiled=compiled, segment=seg, triage=tri, targets=tri.targets)
    if tri.targets:  # the first target searched: its search's and one gate call's inputs
        first = tri.targets[0]
        part = scope_segment(seg, first)
        queues = {"gpu_queue": "gpu", "cpu_queue": "cpu"}
        gate = {"candidate_id": "c", "source": first.source or source}
        scope = store_scope(first, part, None, store)
        payloads["search input"] = SearchKernelInput(
            campaign_id="c", compiled=compiled, scope=scope, target=first, **queues
        )
        payloads["gate input"] = CandidateGateInput(
            compiled=compiled, scope=scope, target=first, **gate
        )
        payloads["inline: search input, scoped"] = SearchKernelInput(
            campaign_id="c", compiled=compiled, segment=part, target=first, **queues
        )
    payloads |= {"inline: campaign state": inline, "inline: segment": seg, "inline: triage": tri}
    return {name: round(_size(v) / 1024, 1) for name, v in payloads.items()}


def child_main(path: Path, stages: Stages = measure) -> None:
    """The child's run: stacks on SIGUSR1, a line per stage, its row at the end."""
    faulthandler.register(signal.SIGUSR1, all_threads=True)  # to stderr: the model's log
    with tempfile.TemporaryDirectory() as home:
        row = stages(path, Path(home), Progress())
    sys.stdout.write(RESULT + json.dumps(row) + "\n")
    sys.stdout.flush()


def child_command(path: Path) -> list[str]:
    """The child of one model: this module, unbuffered, so each line comes as it is written."""
    return [sys.executable, "-u", "-m", "scripts.gpu_large_models", "--one", str(path)]


class ModelChild:
    """One model's child process, watched while it runs.

    Its stage lines go to the progress file as they arrive and everything else it writes
    to its log file (a pipe nobody reads could fill and stall it).  Past the timeout it
    is made to write all its threads' stacks, then killed with its own children.
    """

    def __init__(self, model: str, out: Path) -> None:
        self.model = model
        self.progress = out / f"large_models.{model}.progress.jsonl"
        self.log = out / f"large_models.{model}.log"
        self.result: dict[str, Any] | None = None
        self.last_stage = ""
        self.returncode: int | None = None
        self.timed_out = False

    def run(self, command: list[str], timeout: float, grace: float = STACK_GRACE_S) -> None:
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        with self.log.open("a") as log, self.progress.open("a") as progress:
            proc = subprocess.Popen(
                command,
                stdout=subprocess.PIPE,
                stderr=log,
                text=True,
                cwd=ROOT,
                env=env,
                start_new_session=True,  # its own process group: ``stop`` kills all of it
            )
            assert proc.stdout is not None
            reader = threading.Thread(
                target=self._read, args=(proc.stdout, progress, log), daemon=True
            )
            reader.start()
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.timed_out = True
                stop(proc, grace)
            self.returncode = proc.wait()
            reader.join(READER_JOIN_S)  # a process that left the child's tree may hold the pipe
            if not reader.is_alive():
                proc.stdout.close()

    def _read(self, stdout: IO[str], progress: IO[str], log: IO[str]) -> None:
        """The child's stdout, line by line as it comes (its own thread)."""
        for line in stdout:
            if line.startswith(PROGRESS):
                text = line.removeprefix(PROGRESS)
                progress.write(text)
                progress.flush()
                self.last_stage = str(_json(text).get("stage", "?"))
                print(f"[{self.model}] {text.rstrip()}"[:400], flush=True)
            elif line.startswith(RESULT):
                self.result = _json(line.removeprefix(RESULT)) or None
            else:
                log.write(line)
                log.flush()

    def row(self, timeout: float) -> dict[str, Any]:
        """The child's row, or what it did and where its log is when it had none."""
        if self.returncode == 0 and self.result is not None:
            return self.result
        if self.timed_out:
            last = self.last_stage or "none"
            running = last.removesuffix(" start") if last.endswith(" start") else "the model"
            step = last_compile_step(self.log)
            error = f"{running} did not finish within {timeout:g} s; last stage: {last}"
            error += f" (compile step: {step})" if step else ""
            error += f"; all threads' stacks are in {self.log.name}"
        else:
            error = f"exit {self.returncode}: {last_line(self.log)} (the log: {self.log.name})"
        return {
            "model": self.model,
            "error": error,
            "last_stage": self.last_stage,
            "log": self.log.name,
            "progress": self.progress.name,
            "log_tail": _text(self.log)[-2000:],
        }


def stop(proc: subprocess.Popen, grace: float) -> None:
    """SIGUSR1 (the child writes its stacks), ``grace`` seconds, then SIGKILL to its whole
    process group (Inductor's compile workers would hold the pipe open), as the gates'
    runner stops a child."""
    proc.send_signal(signal.SIGUSR1)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(grace)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)


def last_line(log: Path) -> str:
    """The log's last non-empty line: a traceback's exception."""
    lines = [line for line in _text(log).splitlines() if line.strip()]
    return lines[-1].strip() if lines else "(nothing in the log)"


def last_compile_step(log: Path) -> str:
    """The compile's last own step in the log (``kernelopt.checkpoint.report``), if any."""
    lines = _text(log).splitlines()
    steps = [line.removeprefix(COMPILE_STEP) for line in lines if line.startswith(COMPILE_STEP)]
    return str(_json(steps[-1]).get("step", steps[-1])) if steps else ""


def _text(log: Path) -> str:
    return log.read_text(errors="replace") if log.is_file() else ""


def _json(text: str) -> dict[str, Any]:
    """A line's JSON object, or {}: a garbled line must not stop the reading of the rest."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        return {}
    return value if isinstance(value, dict) else {}


def run_model(
    path: Path, out: Path, timeout: float, command: list[str] | None = None
) -> dict[str, Any]:
    """One model in its own child; its row, or how far it got."""
    child = ModelChild(path.stem, out)
    child.run(command or child_command(path), timeout)
    return child.row(timeout)


def run_all(
    paths: list[Path],
    out: Path,
    suffix: str,
    timeout: float,
    run: Callable[[Path, Path, float], dict[str, Any]] = run_model,
) -> list[dict[str, Any]]:
    """Every model in turn, the .json and .md written again after each one: a run the call
    limit cuts keeps the models it finished."""
    out.mkdir(parents=True, exist_ok=True)
    rows: list[dict[str, Any]] = []
    for path in paths:
        rows.append(run(path, out, timeout))
        print(json.dumps(rows[-1])[:400], flush=True)
        (out / f"large_models{suffix}.json").write_text(json.dumps(rows, indent=2) + "\n")
        (out / f"large_models{suffix}.md").write_text(table(rows))
    return rows


def table(rows: list[dict[str, Any]]) -> str:
    cols = [
        ("model", "model"),
        ("compile s", "compile_s"),
        ("segment s", "segment_s"),
        ("triage s", "triage_s"),
        ("kernels / launches", None),
        ("library calls", "library_calls"),
        ("targets (searched / deferred)", None),
        ("f", "f"),
        ("ceiling S=2 / inf", None),
        ("peak GPU / host GiB", None),
    ]
    lines = ["| " + " | ".join(c for c, _ in cols) + " |", "|" + "---|" * len(cols)]
    for r in rows:
        if "error" in r:
            error = r["error"][:200].replace("\n", " ").replace("|", "/")
            lines.append(f"| {r['model']} | error: {error} |")
            continue
        cells = []
        for title, key in cols:
            if key is not None:
                cells.append(str(r[key]))
            elif title.startswith("kernels"):
                cells.append(f"{r['kernels']} / {r['launches']}")
            elif title.startswith("targets"):
                cells.append(f"{r['targets']} ({r['searched']} / {r['deferred']})")
            elif title.startswith("ceiling"):
                cells.append(f"{r['ceilings']['2']:.3f}x / {r['ceilings']['inf']:.3f}x")
            else:
                cells.append(f"{r['peak_gpu_gib']} / {r['peak_host_gib']}")
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", "Payloads (KiB, as Temporal encodes them):", ""]
    names = max((list(r["payload_kib"]) for r in rows if "payload_kib" in r), key=len, default=[])
    lines += ["| model | " + " | ".join(names) + " |", "|" + "---|" * (len(names) + 1)]
    lines += [
        f"| {r['model']} | " + " | ".join(str(r["payload_kib"].get(n, "-")) for n in names) + " |"
        for r in rows
        if "payload_kib" in r
    ]
    lines += ["", "Triage's cut-off and first targets:", ""]
    for r in rows:
        if "cutoff" in r:
            top = ", ".join(f"{t} ({s:.1%})" for t, s in r["top_targets"][:5])
            lines.append(f"* {r['model']}: {r['cutoff']}. First: {top}.")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=Path("."))
    parser.add_argument("--one", type=Path, help=argparse.SUPPRESS)  # the child's model
    parser.add_argument(
        "--timeout",
        type=float,
        default=1800.0,
        help="seconds per model; on the device set it below the call's limit (e.g. 520)",
    )
    parser.add_argument(
        "--model", action="append", default=[], help="only this model (file stem); repeatable"
    )
    args = parser.parse_args()
    if args.one is not None:
        child_main(args.one)
        return
    chosen = [p for p in MODELS if not args.model or p.stem in args.model]
    suffix = "" if not args.model else "." + "+".join(p.stem for p in chosen)
    run_all(chosen, args.out, suffix, args.timeout)


if __name__ == "__main__":
    main()
