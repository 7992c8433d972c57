"""A screening round's files: the problem, the baseline and each candidate as a ``ModelSource``.

The screen job (``gates.jobs.screen``) builds every model from files, like the
gate jobs; this lays them out in one directory that the job names, so the
runner's sandbox shows the child exactly these (read-only) and, of the
artifact store, only the blobs their wrapper JSON reaches.  Kernel candidates
are re-stitched into Inductor's wrapper the way ``gate_candidate`` does.
"""

from __future__ import annotations

from pathlib import Path

from gates.protocol import ModelSource
from kernelopt.contracts.base import ArtifactRef
from kernelopt.contracts.compiled import Replacement, RestitchInput, TargetKind
from kernelopt.contracts.screening import ScreenCandidate, ScreenInput
from kernelopt.store import ArtifactStore, LocalBackend


class ScreenLayout:
    """The problem, compiled result and candidates as files a sandboxed child may read."""

    def __init__(self, inp: ScreenInput, store: ArtifactStore, directory: Path) -> None:
        self.inp = inp
        self.store = store
        self.dir = directory
        name = inp.compiled.problem.name
        self.problem = str(store.materialize(inp.compiled.problem.source, directory, f"{name}.py"))
        self.compiled_json = directory / "compiled.json"
        self.compiled_json.write_text(inp.compiled.model_dump_json())
        backend = store.backend
        self.store_root = str(backend.root) if isinstance(backend, LocalBackend) else ""
        self.inputs_dir = directory / "inputs"  # no reference ran: no policy, no weights file
        self.inputs_dir.mkdir(exist_ok=True)

    def wrapper(self, ref: ArtifactRef | None) -> ModelSource:
        wrapper_json = ""
        if ref is not None:
            path = self.dir / f"wrapper-{ref.short}.json"
            path.write_text(ref.model_dump_json())
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
            path = self.store.materialize(cand.source, self.dir, f"cand_{safe_name(cand)}.py")
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
        ref = self.store.put_text(
            text, media_type="text/x-python", name=f"screen_{safe_name(cand)}.py"
        )
        return self.wrapper(ref)


def safe_name(cand: ScreenCandidate) -> str:
    """The candidate id as a file-name part."""
    return "".join(c if c.isalnum() else "_" for c in cand.candidate_id)[:80]
