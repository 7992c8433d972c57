"""Screen a round's candidates: the library entry point the screening activity runs.

``screen_candidates(inp, store)`` runs in the activity's supervised child (like
``gates.campaign``): it lays the problem, the baseline and every candidate out
in a work directory (re-stitching kernel candidates into Inductor's wrapper the
way ``gate_candidate`` does) and starts one sandboxed ``activities.screen_child``
for the whole round (``gates.sandbox.wrap_command``, the profiler's way in).  A
child that dies or stalls on a candidate costs that candidate an estimate with
the reason, and a fresh child screens the rest.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from activities.screen_child import JOB, RESULTS, ChildLine, ScreenChildJob
from gates import sandbox
from gates.protocol import ModelSource
from kernelopt.contracts.base import ArtifactRef
from kernelopt.contracts.compiled import Replacement, RestitchInput, TargetKind
from kernelopt.contracts.screening import (
    ScreenCandidate,
    ScreeningEstimate,
    ScreenInput,
    ScreenResult,
)
from kernelopt.errors import DeterministicError, InfrastructureError
from kernelopt.log import get_logger
from kernelopt.store import ArtifactStore, LocalBackend

log = get_logger(__name__)
_REPO_ROOT = Path(__file__).resolve().parent.parent
_POLL_S = 0.05


class _Layout:
    """The problem, compiled result and candidates as files a sandboxed child may read."""

    def __init__(self, inp: ScreenInput, store: ArtifactStore, workdir: Path) -> None:
        self.inp = inp
        self.store = store
        self.dir = workdir
        name = inp.compiled.problem.name
        self.problem = str(store.materialize(inp.compiled.problem.source, workdir, f"{name}.py"))
        self.compiled_json = workdir / "compiled.json"
        self.compiled_json.write_text(inp.compiled.model_dump_json())
        backend = store.backend
        self.store_root = str(backend.root) if isinstance(backend, LocalBackend) else ""
        self.json_files: list[Path] = [self.compiled_json]

    def wrapper(self, ref: ArtifactRef | None) -> ModelSource:
        wrapper_json = ""
        if ref is not None:
            path = self.dir / f"wrapper-{ref.short}.json"
            path.write_text(ref.model_dump_json())
            self.json_files.append(path)
            wrapper_json = str(path)
        return ModelSource(
            kind="wrapper",
            problem_path=self.problem,
            compiled_json=str(self.compiled_json),
            wrapper_json=wrapper_json,
            store_root=self.store_root,
        )

    def baseline(self) -> ModelSource:
        if self.inp.baseline == "eager":
            return ModelSource(kind="eager", problem_path=self.problem)
        return self.wrapper(None)

    def candidate(self, cand: ScreenCandidate) -> ModelSource:
        """The candidate as the child builds it; DeterministicError when it does not fit."""
        if self.inp.target.kind == TargetKind.FORWARD:
            path = self.store.materialize(cand.source, self.dir, f"cand_{_safe(cand)}.py")
            return ModelSource(
                kind="candidate", problem_path=self.problem, candidate_path=str(path)
            )
        from kernelopt.compile.restitch import build_restitched

        text, _ = build_restitched(
            RestitchInput(
                compiled=self.inp.compiled,
                segment=self.inp.segment,
                replacements=[Replacement(target=self.inp.target, source=cand.source)],
                run=False,
            ),
            self.store,
        )
        ref = self.store.put_text(text, media_type="text/x-python", name=f"screen_{_safe(cand)}.py")
        return self.wrapper(ref)


def _safe(cand: ScreenCandidate) -> str:
    return "".join(c if c.isalnum() else "_" for c in cand.candidate_id)[:80]


def _command(layout: _Layout, outdir: Path) -> tuple[list[str], dict[str, str]]:
    base = dict(os.environ)
    base.pop("KERNELOPT_ZYGOTE_SOCKET", None)  # candidate code has no business with the zygote
    base["TORCHINDUCTOR_COMPILE_THREADS"] = "1"
    extra = {"TRITON_INTERPRET": "1"} if layout.inp.device == "cpu" else {}
    if not sandbox.enabled():  # wrap_command returns ``base`` as is: it needs our path too
        path = base.get("PYTHONPATH", "")
        base["PYTHONPATH"] = str(_REPO_ROOT) + (os.pathsep + path if path else "")
        base.update(extra)
    argv = [sys.executable, "-m", "activities.screen_child", str(layout.dir), str(outdir)]
    blobs = (
        sandbox.store_blobs(Path(layout.store_root), layout.json_files) if layout.store_root else []
    )
    return sandbox.wrap_command(
        argv, ro=[layout.dir, *blobs], rw=[outdir], cwd=outdir, env=base, extra=extra
    )


def _lines(outdir: Path) -> list[ChildLine]:
    path = outdir / RESULTS
    if not path.is_file():
        return []
    out = []
    for raw in path.read_text().splitlines():
        try:
            out.append(ChildLine.model_validate_json(raw))
        except ValueError:
            break  # a line cut short by a kill: the candidate has no result
    return out


def _run_child(argv: list[str], env: dict[str, str], workdir: Path, stall_s: float) -> str:
    """Run one child until it exits, or until no line arrived for ``stall_s``: how it ended."""
    results = workdir / "out" / RESULTS
    with open(workdir / "child.log", "ab") as logf:
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=logf,
            stderr=subprocess.STDOUT,
            cwd=str(workdir / "out"),
            env=env,
            start_new_session=True,
        )
        seen, last = -1, time.monotonic()
        try:
            while proc.poll() is None:
                size = results.stat().st_size if results.exists() else 0
                if size != seen:
                    seen, last = size, time.monotonic()
                elif time.monotonic() - last > stall_s:
                    return f"no result within {stall_s:.0f} s; child killed"
                time.sleep(_POLL_S)
        finally:
            _kill_group(proc.pid)
            proc.wait()
    code = proc.returncode
    return "" if code == 0 else f"child exited with {code}"


def _kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


def _tail(workdir: Path, limit: int = 2000) -> str:
    path = workdir / "child.log"
    return path.read_text(errors="replace")[-limit:] if path.is_file() else ""


def screen_candidates(inp: ScreenInput, store: ArtifactStore) -> ScreenResult:
    """Untrusted estimates for a round's candidates, in the order given (module docstring)."""
    workdir = Path(tempfile.mkdtemp(prefix="kernelopt-screen-"))
    try:
        return _screen(inp, store, workdir)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def _screen(inp: ScreenInput, store: ArtifactStore, workdir: Path) -> ScreenResult:
    jobdir, outdir = workdir / "in", workdir / "out"  # read-only and writable in the sandbox
    jobdir.mkdir()
    outdir.mkdir()
    layout = _Layout(inp, store, jobdir)
    early: dict[str, ScreeningEstimate] = {}
    sources: list[tuple[str, ModelSource]] = []
    for cand in inp.candidates:
        try:
            sources.append((cand.candidate_id, layout.candidate(cand)))
        except DeterministicError as exc:
            early[cand.candidate_id] = ScreeningEstimate(
                candidate_id=cand.candidate_id, smoke_note=f"cannot be re-stitched: {exc}"[:400]
            )
    (jobdir / "inputs").mkdir()
    job = ScreenChildJob(
        device=inp.device,
        seed=inp.seed,
        model_seed=inp.compiled.problem.seed,
        inputs_dir=str(jobdir / "inputs"),
        baseline=layout.baseline(),
        candidates=sources,
        params=inp.params,
    )
    (jobdir / JOB).write_text(job.model_dump_json())
    argv, env = _command(layout, outdir)
    lost: dict[str, str] = {}  # candidates that ended a child: why
    starts = 0
    while sources:
        starts += 1
        ended = _run_child(argv, env, workdir, inp.params.timeout_s)
        done = {line.candidate_id for line in _lines(outdir)}
        if "" not in done:  # the baseline itself did not run: not the candidates' fault
            raise InfrastructureError(f"screening baseline failed ({ended}): {_tail(workdir)}")
        pending = [cid for cid, _ in sources if cid not in done and cid not in lost]
        if not pending:
            break
        lines = _lines(outdir)
        if lines and lines[-1].restart:  # its line names the CUDA error it left behind
            log.info("screen.child_restart", after=lines[-1].candidate_id)
            continue
        # the child works in order: the first candidate without a line ended it
        lost[pending[0]] = f"screening child died on it: {ended or 'exited early'}"
        log.info("screen.child_lost", candidate_id=pending[0], why=ended)
        job = job.model_copy(update={"candidates": [s for s in sources if s[0] not in lost]})
        (jobdir / JOB).write_text(job.model_dump_json())
    return ScreenResult(estimates=_estimates(inp, _lines(outdir), early, lost), child_starts=starts)


def _estimates(
    inp: ScreenInput,
    lines: list[ChildLine],
    early: dict[str, ScreeningEstimate],
    lost: dict[str, str],
) -> list[ScreeningEstimate]:
    by_id = {line.candidate_id: line for line in lines}
    base_ms = by_id[""].ms if "" in by_id else None
    out = []
    for cand in inp.candidates:
        cid = cand.candidate_id
        if cid in early:
            out.append(early[cid])
            continue
        line = by_id.get(cid)
        if line is None:
            out.append(
                ScreeningEstimate(candidate_id=cid, smoke_note=lost.get(cid, "not screened"))
            )
            continue
        speedup = base_ms / line.ms if line.ok and line.ms and base_ms else None
        out.append(
            ScreeningEstimate(
                candidate_id=cid,
                smoke_ok=line.ok,
                smoke_note=line.note,
                estimated_ms=line.ms,
                baseline_ms=base_ms,
                estimated_speedup=speedup,
                seconds=round(line.seconds, 4),
            )
        )
    return out
