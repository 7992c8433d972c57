"""A screening round's files: the problem, the baseline and each candidate as a ``ModelSource``.

The screen job (``gates.jobs.screen``) builds every model from files, like the
gate jobs; this lays them out in one directory that the job names, so the
runner's sandbox shows the child exactly these (read-only) and, of the
artifact store, only the blobs their wrapper JSON reaches.  Kernel candidates
are re-stitched into Inductor's wrapper the way ``gate_candidate`` does.
"""

from __future__ import annotations

from pathlib import Path

from gates.layout import CompiledLayout
from gates.protocol import ModelSource
from kernelopt.contracts.compiled import TargetKind
from kernelopt.contracts.screening import ScreenCandidate, ScreenInput
from kernelopt.store import ArtifactStore


class ScreenLayout(CompiledLayout):
    """The problem, compiled result and candidates as files a sandboxed child may read."""

    def __init__(self, inp: ScreenInput, store: ArtifactStore, directory: Path) -> None:
        super().__init__(inp.compiled, store, directory)
        self.inp = inp
        self.inputs_dir = directory / "inputs"  # no reference ran: no policy, no weights file
        self.inputs_dir.mkdir(exist_ok=True)

    def baseline(self) -> ModelSource:
        if self.inp.baseline == "eager":
            return ModelSource(kind="eager", problem_path=self.problem_path)
        return self.baseline_for(self.inp.target.kind == TargetKind.FORWARD)

    def candidate(self, cand: ScreenCandidate) -> ModelSource:
        """The candidate as the child builds it; DeterministicError when it does not fit."""
        source, _ = self.candidate_source(
            self.inp.target, self.inp.segment, cand.source, safe_name(cand)
        )
        return source


def safe_name(cand: ScreenCandidate) -> str:
    """The candidate id as a file-name part."""
    return "".join(c if c.isalnum() else "_" for c in cand.candidate_id)[:80]
