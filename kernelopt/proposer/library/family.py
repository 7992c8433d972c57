"""The library-choices strategy: which choices a round offers, from the forward's library calls."""

from __future__ import annotations

from kernelopt.contracts.search import BuiltinProposeInput, BuiltinVariant
from kernelopt.log import get_logger
from kernelopt.proposer.library.candidate import (
    ADDMM_ACTIVATION,
    CHANNELS_LAST,
    CUDNN_BENCHMARK,
    KNOWN,
    candidate_source,
    read_header,
)
from kernelopt.proposer.library.detect import library_use
from kernelopt.proposer.targets import not_whole_forward
from kernelopt.store import ArtifactStore

log = get_logger(__name__)
LIBRARY = "library"
CPU_NOTE = "cuDNN benchmark mode is a no-op on the CPU: not proposed"
_WHAT = {
    CHANNELS_LAST: "convolutions in channels_last",
    CUDNN_BENCHMARK: "cuDNN benchmark-mode algorithm selection, scoped to forward",
    ADDMM_ACTIVATION: "linear + ReLU as one cuBLASLt GEMM with a bias+ReLU epilogue",
}


def label_of(choices: list[str]) -> str:
    """``library:channels_last+cudnn_benchmark`` (choices in ``KNOWN`` order)."""
    return f"{LIBRARY}:" + "+".join(c for c in KNOWN if c in choices)


class LibraryFamily:
    """Strategy: each applicable choice alone, then the convolution choices together.

    A state that is itself a library candidate is extended by one more choice,
    so accepted choices accumulate over rounds.
    """

    name = LIBRARY

    def combos(self, conv: bool, matmul: bool, cuda: bool) -> list[list[str]]:
        out: list[list[str]] = []
        if conv:
            out.append([CHANNELS_LAST])
            if cuda:
                out += [[CUDNN_BENCHMARK], [CHANNELS_LAST, CUDNN_BENCHMARK]]
        if matmul:
            out.append([ADDMM_ACTIVATION])
        return out

    def propose(
        self, inp: BuiltinProposeInput, store: ArtifactStore, count: int, exclude: set[str]
    ) -> tuple[list[BuiltinVariant], str]:
        """Up to ``count`` library-choice candidates for a whole-forward module target."""
        if count <= 0:
            return [], ""
        refused = not_whole_forward(inp, "library choices apply")
        if refused:
            return [], refused
        use = library_use(inp.segment.library_calls)
        if not use.any:
            return [], "no convolution or matmul library call in the forward"
        cuda = inp.compiled.gpu_name not in ("", "cpu")
        notes = [] if cuda or not use.conv else [CPU_NOTE]
        source = store.get_text(inp.compiled.problem.source)
        state = read_header(store.get_text(inp.state_source)) or []
        out: list[BuiltinVariant] = []
        for combo in self.combos(bool(use.conv), bool(use.matmul), cuda):
            choices = sorted({*state, *combo}, key=KNOWN.index)
            label = label_of(choices)
            if set(choices) == set(state) or label in exclude or len(out) >= count:
                continue
            try:
                text = candidate_source(source, choices, inp.compiled.problem.seed)
            except Exception as exc:  # the user's module is traced here: a failure is a note
                why = f"{type(exc).__name__}: {exc}".splitlines()[0][:200]
                log.info("library choice not buildable", label=label, reason=why)
                notes.append(f"{label}: {why}")
                continue
            exclude = exclude | {label}
            ref = store.put_text(text, "text/x-python", f"{label.replace(':', '_')}.py")
            out.append(
                BuiltinVariant(
                    label=label,
                    source=ref,
                    description="library choice (changes f): "
                    + "; ".join(_WHAT[c] for c in choices),
                )
            )
        if not out and not notes:
            notes.append("every library choice was tried")
        return out, "; ".join(notes)


FAMILY = LibraryFamily()


def propose_library(
    inp: BuiltinProposeInput, store: ArtifactStore, count: int, exclude: set[str]
) -> tuple[list[BuiltinVariant], str]:
    """The built-in proposer's entry: the default library-choices strategy."""
    return FAMILY.propose(inp, store, count, exclude)
