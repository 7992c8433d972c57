"""A compiled problem laid out as files that a gate or screen child builds its models from.

Children build every model from files (``gates.protocol.ModelSource``), and the
runner's sandbox shows them only the files a job names.  The campaign gates
and a screening round lay out the same things -- the problem copy, the
compile result, the store root and each candidate -- so both use this.
"""

from __future__ import annotations

from pathlib import Path

from gates.protocol import ModelSource
from kernelopt.contracts.base import ArtifactRef
from kernelopt.contracts.compiled import (
    CompileResult,
    Replacement,
    RestitchInput,
    SearchTarget,
    SegmentResult,
    TargetKind,
)
from kernelopt.store import ArtifactStore, LocalBackend

# the file a kernel problem's baseline ModelNew is written to, which the gates guard
OWN_BASELINE = "baseline-own.py"


class CompiledLayout:
    """The problem, compiled result and store root of one compile, written into ``directory``."""

    def __init__(self, compiled: CompileResult, store: ArtifactStore, directory: Path) -> None:
        self.dir = directory
        self.compiled = compiled
        self.store = store
        name = compiled.problem.name
        self.problem_path = str(store.materialize(compiled.problem.source, directory, f"{name}.py"))
        self.compiled_json = directory / "compiled.json"
        self.compiled_json.write_text(compiled.model_dump_json())
        backend = store.backend
        self.store_root = str(backend.root) if isinstance(backend, LocalBackend) else ""
        # a kernel problem's baseline as the ModelNew its wrapper runs (``baseline_for``)
        self.own_baseline: Path | None = None
        if compiled.problem.kind.own_baseline:
            from kernelopt.kinds.compile import baseline_model_source

            try:
                text = baseline_model_source(store.get_text(compiled.wrapper))
            except (ValueError, SyntaxError):  # not the kind's wrapper: it stays the baseline
                text = None
            if text is not None:
                self.own_baseline = directory / OWN_BASELINE
                self.own_baseline.write_text(text)

    def child_files(self) -> list[Path]:
        """The files of this layout that children read and a candidate must not rewrite
        (the gates keep their bytes and compare them after every candidate process)."""
        files = [self.compiled_json, *self.dir.glob("wrapper-*.json")]
        return [*files, self.own_baseline] if self.own_baseline is not None else files

    def baseline_for(self, whole_forward: bool) -> ModelSource:
        """Gate 4's baseline in the form its candidate is timed in.

        A whole-forward candidate is timed as its ``ModelNew``; a kernel problem's
        baseline is a ``ModelNew`` too, which its wrapper runs through ``ForwardRunner``:
        timing the candidate without that round trip and the baseline with it would
        favour the candidate, so the baseline is then timed as its ``ModelNew`` itself.
        Otherwise the compile's wrapper (Inductor's, or a kernel problem's beside a
        re-stitched wrapper).
        """
        if whole_forward and self.own_baseline is not None:
            return ModelSource(
                kind="candidate",
                problem_path=self.problem_path,
                candidate_path=str(self.own_baseline),
            )
        return self.wrapper_source(None)

    def wrapper_source(self, wrapper: ArtifactRef | None) -> ModelSource:
        """``wrapper`` None: the baseline wrapper; else an ArtifactRef of a re-stitched one."""
        wrapper_json = ""
        if wrapper is not None:
            path = self.dir / f"wrapper-{wrapper.short}.json"
            path.write_text(wrapper.model_dump_json())
            wrapper_json = str(path)
        return ModelSource(
            kind="wrapper",
            problem_path=self.problem_path,
            compiled_json=str(self.compiled_json),
            wrapper_json=wrapper_json,
            store_root=self.store_root,
        )

    def candidate_source(
        self, target: SearchTarget, segment: SegmentResult | None, source: ArtifactRef, name: str
    ) -> tuple[ModelSource, dict[str, str]]:
        """The candidate as a child builds it, and the re-stitch's forms (none for a forward).

        A whole-forward candidate is its own file; a kernel candidate is put back
        into Inductor's wrapper.  ``DeterministicError`` when it does not fit.
        """
        if target.kind == TargetKind.FORWARD:
            path = self.store.materialize(source, self.dir, f"candidate_{name}.py")
            return (
                ModelSource(
                    kind="candidate", problem_path=self.problem_path, candidate_path=str(path)
                ),
                {},
            )
        from kernelopt.compile.restitch import build_restitched

        text, forms = build_restitched(
            RestitchInput(
                compiled=self.compiled,
                segment=segment,
                replacements=[Replacement(target=target, source=source)],
                run=False,
            ),
            self.store,
        )
        ref = self.store.put_text(
            text, media_type="text/x-python", name=f"{self.compiled.problem.name}_{name}.py"
        )
        return self.wrapper_source(ref), forms
