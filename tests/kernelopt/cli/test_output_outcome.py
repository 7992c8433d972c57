"""How `kernelopt show` prints an outcome: no speedup claimed where no baseline exists."""

from __future__ import annotations

from kernelopt.cli.campaign_commands import print_outcome
from kernelopt.cli.output import console
from kernelopt.contracts import ArtifactRef
from tests.support.bench_outcomes import outcome


def _printed(o) -> str:
    with console.capture() as cap:
        print_outcome(o, as_json=False)
    return " ".join(cap.get().split())


def test_an_outcome_without_a_baseline_claims_no_speedup() -> None:
    stopped = outcome("a", "fallback", reason="cancelled by user; no baseline was built")
    text = _printed(stopped)
    assert "no baseline was built" in text and "1.000x over" not in text


def test_an_outcome_with_a_baseline_states_its_speedup() -> None:
    done = outcome("b", "matched", 1.004).model_copy(update={"baseline_ms": 0.5})
    assert "1.004x over torch.compile" in _printed(done)


def test_the_outcome_says_which_form_the_returned_model_has() -> None:
    ref = ArtifactRef(sha256="ab" * 32, size=10, name="p_regen.py", media_type="text/x-python")
    won = outcome("c", "optimized", 1.2).model_copy(update={"wrapper": ref, "baseline_ms": 0.5})
    assert "call(args)" in _printed(won) and "ModelNew" not in _printed(won)
    as_model = won.model_copy(update={"source_kind": "forward"})
    shown = _printed(as_model)
    assert "ModelNew" in shown and "call(args)" not in shown


def test_the_returned_model_is_a_file_in_the_home(tmp_path) -> None:
    """The user gets the model as a file beside the reports, not only a digest."""
    from kernelopt.campaign_status import model_path
    from kernelopt.store import open_store

    text = "class ModelNew(Model):\n    pass\n"
    ref = open_store(tmp_path / "artifacts").put_text(text, "text/x-python", "c.py")
    won = outcome("d", "optimized", 1.2).model_copy(
        update={"wrapper": ref, "source_kind": "forward", "baseline_ms": 0.5}
    )
    path = model_path(won, tmp_path)
    assert path is not None and path.parent == tmp_path / "models"
    assert path.read_text() == text and path.suffix == ".py"
    with console.capture() as cap:
        print_outcome(won, as_json=False, home=tmp_path)
    assert "models" in cap.get()
    elsewhere = won.model_copy(update={"wrapper": ArtifactRef(sha256="ef" * 32, size=3)})
    assert model_path(elsewhere, tmp_path) is None  # not in this machine's store
