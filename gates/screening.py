"""Screen a round's candidates: the library entry point the screening activity runs.

``screen_candidates(inp, store)`` runs in the activity's supervised child (like
``gates.campaign``): it lays the round out (``gates.screen_layout``) and runs
one ``screen`` job (``gates.jobs.screen``) for the whole round through the gate
runner (``run_job``): the same launch as every gate job, so the same sandbox,
resource limits and zygote.  The child marks progress before each candidate and
the runner kills it when a candidate stalls it for ``timeout_s`` (a candidate
that forges marks is still stopped by the job's own limit, ``timeout_s`` per
line); a child that dies or stalls on a candidate costs that candidate an
estimate with the reason, and a fresh child, in a fresh workdir, screens the rest.

Candidates of a round share that child (that is what makes screening cheap), so
a hostile one can disturb the estimates of those screened after it (denial of
exploration: they would be screened out unheard).  So the child names a
candidate that left something behind (``ScreenLine.suspect``), and the
candidates after it in the same process are screened again in a fresh child
without it; a results file whose lines are out of order or repeated (written by
a candidate, not by the child) sends every candidate to a child of its own.  A
crash already ends its process, and the rest run in a fresh one.  What stays
possible is in gates/README.md's anti-gaming table: a candidate that hides from
the child's checks, or forges every later line in order, can still keep its
round-mates out of the cascade, never get itself accepted.
"""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from gates.cache_guard import CacheGuard
from gates.protocol import SCREEN_RESULTS, ScreenEntry, ScreenJob, ScreenLine
from gates.runner import ChildOutcome, run_job
from gates.screen_layout import ScreenLayout
from kernelopt.contracts.screening import ScreeningEstimate, ScreenInput, ScreenResult
from kernelopt.errors import DeterministicError, InfrastructureError
from kernelopt.log import get_logger
from kernelopt.store import ArtifactStore

log = get_logger(__name__)


def screen_candidates(inp: ScreenInput, store: ArtifactStore) -> ScreenResult:
    """Untrusted estimates for a round's candidates, in the order given (module docstring)."""
    workdir = Path(tempfile.mkdtemp(prefix="kernelopt-screen-"))
    try:
        return _screen(inp, store, workdir)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def read_lines(path: Path) -> list[ScreenLine]:
    """The lines of a results file up to the first that does not parse (cut short by a kill)."""
    if not path.is_file():
        return []
    out = []
    for raw in path.read_text(errors="replace").splitlines():
        try:
            out.append(ScreenLine.model_validate_json(raw))
        except ValueError:
            break
    return out


@dataclass
class _Pass:
    """Children run over some candidates until each has a line or ended a child."""

    lines: list[ScreenLine]  # in the order the children wrote them
    lost: dict[str, str]  # candidates that ended a child: why
    starts: int
    child_of: dict[str, int]  # candidate -> which of the pass's children screened it

    @property
    def baseline_ms(self) -> float | None:
        return next((line.ms for line in self.lines if line.candidate_id == ""), None)


def _run_child(job: ScreenJob, workdir: Path, lines: list[ScreenLine]) -> ChildOutcome:
    """One screen job in a fresh workdir holding the pass's lines so far.

    Nothing a candidate left in an earlier child's workdir reaches this one, but
    the lines it may have forged there do (the order checks judge them).  The
    child writes the worker's compiler caches, which trusted compiles load later:
    a cache-guard window around it drops every cache file a candidate rewrote, as
    around every gate child (``gates.cache_guard``).
    """
    workdir.mkdir(parents=True)
    (workdir / SCREEN_RESULTS).write_text("".join(f"{x.model_dump_json()}\n" for x in lines))
    stall_s = job.params.timeout_s
    caches = CacheGuard()
    caches.arm()
    try:
        return run_job(
            job,
            workdir,
            timeout_s=stall_s * (len(job.candidates) + 1),  # each line may take stall_s
            stall_s=stall_s,
            device=job.device,
        )
    finally:
        rewritten = [caches.describe(path) for path in caches.check()]
        if rewritten:  # dropped: the next trusted compile builds them again from source
            log.warning("screen_rewrote_compiler_caches", files=rewritten[:20])


def _run_pass(job: ScreenJob, entries: list[ScreenEntry], workdir: Path) -> _Pass:
    todo = list(entries)
    lines: list[ScreenLine] = []
    lost: dict[str, str] = {}
    child_of: dict[str, int] = {}
    starts = 0
    while todo:
        starts += 1
        child_dir = workdir / f"child-{starts}"
        outcome = _run_child(job.model_copy(update={"candidates": todo}), child_dir, lines)
        ended = "" if outcome.ok else outcome.describe()
        lines = read_lines(child_dir / SCREEN_RESULTS)
        for line in lines:
            child_of.setdefault(line.candidate_id, starts)
        if "" not in child_of:  # the baseline itself did not run: not the candidates' fault
            why = outcome.error_text(2000)
            raise InfrastructureError(f"screening baseline failed ({ended}): {why}")
        todo = [e for e in todo if e.candidate_id not in child_of]
        if not todo:
            break
        if lines[-1].restart:  # its line names the CUDA error it left behind
            log.info("screen.child_restart", after=lines[-1].candidate_id)
            continue
        # the child works in order: the first candidate without a line ended it
        cid = todo.pop(0).candidate_id
        lost[cid] = f"screening child died on it: {ended or 'exited early'}"[:400]
        log.info("screen.child_lost", candidate_id=cid, why=ended)
    return _Pass(lines, lost, starts, child_of)


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


_Measured = dict[str, tuple[ScreenLine | None, float | None, str]]  # line, baseline ms, why none


def _measured(run: _Pass, ids: list[str]) -> _Measured:
    by_id = {line.candidate_id: line for line in run.lines}
    return {
        cid: (by_id.get(cid), run.baseline_ms, run.lost.get(cid, "not screened")) for cid in ids
    }


def _screen(inp: ScreenInput, store: ArtifactStore, workdir: Path) -> ScreenResult:
    jobdir = workdir / "in"  # what the job names: read-only in the sandbox
    jobdir.mkdir()
    layout = ScreenLayout(inp, store, jobdir)
    early: dict[str, ScreeningEstimate] = {}
    entries: list[ScreenEntry] = []
    for cand in inp.candidates:
        try:
            entries.append(
                ScreenEntry(candidate_id=cand.candidate_id, model=layout.candidate(cand))
            )
        except DeterministicError as exc:
            early[cand.candidate_id] = ScreeningEstimate(
                candidate_id=cand.candidate_id, smoke_note=f"cannot be re-stitched: {exc}"[:400]
            )
    job = ScreenJob(
        device=inp.device,
        seed=inp.seed,
        model_seed=inp.compiled.problem.seed,
        inputs_dir=str(layout.inputs_dir),
        baseline=layout.baseline(),
        candidates=entries,
        params=inp.params,
    )
    measured, starts, rescreened = _measure(job, entries, workdir) if entries else ({}, 0, [])
    return ScreenResult(
        estimates=_estimates(inp, measured, early), child_starts=starts, rescreened=rescreened
    )


def _measure(
    job: ScreenJob, entries: list[ScreenEntry], workdir: Path
) -> tuple[_Measured, int, list[str]]:
    """All candidates in one child; again in a fresh one those a suspect may have disturbed.

    When lines were forged, or the fresh child is disturbed too, each of them is
    screened alone: one child per candidate, where it can only misreport itself.
    """
    ids = [e.candidate_id for e in entries]
    first = _run_pass(job, entries, workdir / "out")
    starts = first.starts
    forged = _out_of_order(first, ids)
    if forged:
        log.warning("screen.forged_lines", why=forged)
        measured: _Measured = {}
        again = entries  # whose line is whose is unknown: every candidate again
    else:
        measured = _measured(first, ids)
        disturbed = _disturbed(first)
        again = [e for e in entries if e.candidate_id in disturbed]
        if again:
            second = _run_pass(job, again, workdir / "again")
            starts += second.starts
            redo = [e.candidate_id for e in again]
            if not _out_of_order(second, redo) and not _disturbed(second):
                measured.update(_measured(second, redo))
                return measured, starts, redo
    for i, entry in enumerate(again):
        alone = _run_pass(job, [entry], workdir / f"alone-{i}")
        starts += alone.starts
        measured.update(_measured(alone, [entry.candidate_id]))
    return measured, starts, [e.candidate_id for e in again]


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
