"""Screen a round's candidates: the library entry point the screening activity runs.

``screen_candidates(inp, store)`` runs in the activity's supervised child (like
``gates.campaign``): it lays the problem, the baseline and every candidate out
in a work directory (re-stitching kernel candidates into Inductor's wrapper the
way ``gate_candidate`` does) and starts one sandboxed ``activities.screen_child``
for the whole round (``gates.sandbox.wrap_command``, the profiler's way in).  A
child that dies or stalls on a candidate costs that candidate an estimate with
the reason, and a fresh child screens the rest.

Candidates of a round share that child, so a hostile one can disturb the
estimates of those screened after it (denial of exploration: they would be
screened out unheard).  The gates' zygote forks only gate jobs, so instead of a
process per candidate: the child names a candidate that left something behind
(``ChildLine.suspect``), and the candidates after it in the same process are
screened again in a fresh child without it; a results file whose lines are out
of order or repeated (written by a candidate, not by the child) sends every
candidate to a child of its own.  A crash already ends its process, and the
rest run in a fresh one.  What stays possible is in gates/README.md's
anti-gaming table: a candidate that hides from the child's checks, or forges
every later line in order, can still keep its round-mates out of the cascade,
never get itself accepted.
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
from dataclasses import dataclass
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


def _run_child(
    argv: list[str], env: dict[str, str], outdir: Path, log_path: Path, stall_s: float
) -> str:
    """Run one child until it exits, or until no line arrived for ``stall_s``: how it ended."""
    results = outdir / RESULTS
    with open(log_path, "ab") as logf:
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=logf,
            stderr=subprocess.STDOUT,
            cwd=str(outdir),
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


def _tail(path: Path, limit: int = 2000) -> str:
    return path.read_text(errors="replace")[-limit:] if path.is_file() else ""


def screen_candidates(inp: ScreenInput, store: ArtifactStore) -> ScreenResult:
    """Untrusted estimates for a round's candidates, in the order given (module docstring)."""
    workdir = Path(tempfile.mkdtemp(prefix="kernelopt-screen-"))
    try:
        return _screen(inp, store, workdir)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


@dataclass
class _Pass:
    """Children run over some candidates until each has a line or ended a child."""

    lines: list[ChildLine]  # in the order the children wrote them
    lost: dict[str, str]  # candidates that ended a child: why
    starts: int
    child_of: dict[str, int]  # candidate -> which of the pass's children screened it

    @property
    def baseline_ms(self) -> float | None:
        return next((line.ms for line in self.lines if line.candidate_id == ""), None)


def _run_pass(
    layout: _Layout, job: ScreenChildJob, sources: list[tuple[str, ModelSource]], outdir: Path
) -> _Pass:
    outdir.mkdir()
    argv, env = _command(layout, outdir)
    log_path = outdir.parent / f"{outdir.name}.log"
    todo = list(sources)
    lost: dict[str, str] = {}
    child_of: dict[str, int] = {}
    starts = 0
    while todo:
        (layout.dir / JOB).write_text(job.model_copy(update={"candidates": todo}).model_dump_json())
        starts += 1
        ended = _run_child(argv, env, outdir, log_path, layout.inp.params.timeout_s)
        lines = _lines(outdir)
        for line in lines:
            child_of.setdefault(line.candidate_id, starts)
        if "" not in child_of:  # the baseline itself did not run: not the candidates' fault
            raise InfrastructureError(f"screening baseline failed ({ended}): {_tail(log_path)}")
        todo = [s for s in todo if s[0] not in child_of]
        if not todo:
            break
        if lines[-1].restart:  # its line names the CUDA error it left behind
            log.info("screen.child_restart", after=lines[-1].candidate_id)
            continue
        # the child works in order: the first candidate without a line ended it
        cid = todo.pop(0)[0]
        lost[cid] = f"screening child died on it: {ended or 'exited early'}"
        log.info("screen.child_lost", candidate_id=cid, why=ended)
    return _Pass(_lines(outdir), lost, starts, child_of)


def _out_of_order(run: _Pass, order: list[str]) -> str:
    """Why the lines cannot all be the child's own ("" if they can): one per id, in job order.

    The child writes the baseline first, then each candidate once, in order; a
    line for a candidate not yet screened, or a second line, was written by a
    candidate's code (which shares the child's writable results file).
    """
    rank = {cid: i for i, cid in enumerate(["", *order])}
    last = -1
    for line in run.lines:
        i = rank.get(line.candidate_id)
        if i is None or i <= last:
            return f"a line for {line.candidate_id!r} out of order or repeated"[:200]
        last = i
    return ""


def _disturbed(run: _Pass) -> set[str]:
    """Candidates screened after a suspect in the same child: their numbers may be its doing.

    What a suspect left behind stays, so the ones after it look suspect too; they
    go to the fresh child all the same (where a second hostile one shows again).
    """
    tainted: set[int] = set()
    out: set[str] = set()
    for line in run.lines:
        if not line.candidate_id:
            continue
        child = run.child_of.get(line.candidate_id, 0)
        if child in tainted:
            out.add(line.candidate_id)
        elif line.suspect:
            tainted.add(child)
    return out


_Measured = dict[str, tuple[ChildLine | None, float | None, str]]  # line, baseline ms, why none


def _measured(run: _Pass, ids: list[str]) -> _Measured:
    by_id = {line.candidate_id: line for line in run.lines}
    return {
        cid: (by_id.get(cid), run.baseline_ms, run.lost.get(cid, "not screened")) for cid in ids
    }


def _screen(inp: ScreenInput, store: ArtifactStore, workdir: Path) -> ScreenResult:
    jobdir = workdir / "in"  # read-only in the sandbox; each pass writes its own out dir
    jobdir.mkdir()
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
    measured, starts, rescreened = (
        _measure(layout, job, sources, workdir) if sources else ({}, 0, [])
    )
    return ScreenResult(
        estimates=_estimates(inp, measured, early), child_starts=starts, rescreened=rescreened
    )


def _measure(
    layout: _Layout, job: ScreenChildJob, sources: list[tuple[str, ModelSource]], workdir: Path
) -> tuple[_Measured, int, list[str]]:
    """All candidates in one child; again in a fresh one those a suspect may have disturbed.

    When lines were forged, or the fresh child is disturbed too, each of them is
    screened alone: one child per candidate, where it can only misreport itself.
    """
    ids = [cid for cid, _ in sources]
    first = _run_pass(layout, job, sources, workdir / "out")
    starts = first.starts
    forged = _out_of_order(first, ids)
    if forged:
        log.warning("screen.forged_lines", why=forged)
        measured: _Measured = {}
        again = sources  # whose line is whose is unknown: every candidate again
    else:
        measured = _measured(first, ids)
        disturbed = _disturbed(first)
        again = [s for s in sources if s[0] in disturbed]
        if again:
            second = _run_pass(layout, job, again, workdir / "again")
            starts += second.starts
            redo = [cid for cid, _ in again]
            if not _out_of_order(second, redo) and not _disturbed(second):
                measured.update(_measured(second, redo))
                return measured, starts, redo
    for i, (cid, src) in enumerate(again):
        alone = _run_pass(layout, job, [(cid, src)], workdir / f"alone-{i}")
        starts += alone.starts
        measured.update(_measured(alone, [cid]))
    return measured, starts, [cid for cid, _ in again]


def _estimates(
    inp: ScreenInput, measured: _Measured, early: dict[str, ScreeningEstimate]
) -> list[ScreeningEstimate]:
    out = []
    for cand in inp.candidates:
        cid = cand.candidate_id
        if cid in early:
            out.append(early[cid])
            continue
        line, base_ms, why = measured.get(cid, (None, None, "not screened"))
        if line is None:
            out.append(ScreeningEstimate(candidate_id=cid, smoke_note=why))
            continue
        speedup = base_ms / line.ms if line.ok and line.ms and base_ms else None
        suspect = f"may disturb others: {line.suspect}" if line.suspect else ""
        note = "; ".join(part for part in (line.note, suspect) if part)
        out.append(
            ScreeningEstimate(
                candidate_id=cid,
                smoke_ok=line.ok,
                smoke_note=note[:400],
                estimated_ms=line.ms,
                baseline_ms=base_ms,
                estimated_speedup=speedup,
                seconds=round(line.seconds, 4),
            )
        )
    return out
