"""First-sight sets reach a timing side only when it asks, once, and never a candidate's view.

The memo check times each side on values it has not seen; these tests hold the parts
that make "not seen" true: the reference moves the sealed sets out of the inputs every
candidate process reads, the parent hands a side its sets on its request only, and a
request made early (by anything else in the process) costs the side its first sight.
"""

from __future__ import annotations

import zlib
from pathlib import Path

import pytest
import torch

import gates.job_progress as job_progress
from gates import first_sight
from gates.call_policy import load_policy
from gates.first_sight import Courier, FirstSightRefused, receive
from gates.problem_io import load_values, save_values, set_path
from gates.protocol import ModelSource, TimingJob
from gates.reference import prepare_reference
from kernelopt.contracts.verdicts import GateSettings

PROBLEM = Path(__file__).resolve().parents[1] / "problems" / "gates" / "swish_bias.py"


def _job(tmp_path: Path, *, paired: bool = True) -> TimingJob:
    inputs, sealed = tmp_path / "inputs", tmp_path / "sealed"
    inputs.mkdir()
    sealed.mkdir()
    save_values(set_path(str(inputs), "heldout"), [torch.full((2, 3), 7.0)])
    for k in range(2):
        save_values(set_path(str(sealed), f"sealed{k}"), [torch.full((2, 3), float(k))])
    model = ModelSource(kind="candidate", problem_path="p.py", candidate_path="c.py")
    return TimingJob(
        side="candidate",
        model=model,
        baseline=model if paired else None,
        device="cpu",
        inputs_dir=str(inputs),
        input_set="seed0",
        first_sight_sets=["sealed0", "sealed1"],
        baseline_first_sight_sets=["heldout"] if paired else [],
        sealed_dir=str(sealed),
    )


@pytest.fixture
def child_workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """This process marks its progress as a timing child would, in its own workdir."""
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.setattr(job_progress, "_progress_path", work / "progress.jsonl")
    return work


def test_each_side_gets_its_own_sets_when_it_asks(tmp_path: Path, child_workdir: Path) -> None:
    job = _job(tmp_path)
    with Courier(job, child_workdir):
        assert not (child_workdir / first_sight.FOLDER).exists()  # nothing before a request
        base = receive(["heldout"], "base_", timeout_s=10)
        assert float(load_values(base[0])[0][0, 0]) == 7.0  # the drawn set, from the inputs
        first_sight.forget("base_")
        paths = receive(["sealed0", "sealed1"], "", timeout_s=10)
        assert [float(load_values(p)[0][0, 0]) for p in paths] == [0.0, 1.0]  # the sealed
        first_sight.forget("")
    assert not (child_workdir / first_sight.FOLDER / "model").exists()


def test_a_second_request_is_refused(tmp_path: Path, child_workdir: Path) -> None:
    """An early request (a forged mark) gets the sets; the harness's own is then refused."""
    job = _job(tmp_path, paired=False)
    with Courier(job, child_workdir) as courier:
        receive(["sealed0", "sealed1"], "", timeout_s=10)
        first_sight.forget("")  # the forger read them and removed the traces
        with pytest.raises(FirstSightRefused, match="asked for before"):
            receive(["sealed0", "sealed1"], "", timeout_s=10)
    assert courier.problems == ["model: asked again"]


def test_sets_found_before_the_request_fail_the_side(tmp_path: Path, child_workdir: Path) -> None:
    job = _job(tmp_path, paired=False)
    with Courier(job, child_workdir):
        receive(["sealed0", "sealed1"], "", timeout_s=10)  # asked early, files left in place
        with pytest.raises(FirstSightRefused, match="before this side asked"):
            receive(["sealed0", "sealed1"], "", timeout_s=10)


def test_a_hidden_request_serves_no_side(tmp_path: Path, child_workdir: Path) -> None:
    """A forger that cuts the harness's request out of the marks, so the parent sees only
    its own early one, costs every side its sets."""
    job = _job(tmp_path)
    progress = child_workdir / "progress.jsonl"
    with Courier(job, child_workdir) as courier:
        receive(["sealed0", "sealed1"], "", timeout_s=10)  # the forged, early request
        first_sight.forget("")
        job_progress.mark("samples")
        progress.write_text(progress.read_text()[:10])  # the marks cut short
        # refused either way: the courier read the request as early, or (on a loaded CPU) it
        # had already served the forged one and the side finds the sets there before asking
        with pytest.raises(FirstSightRefused, match=r"asked for before|before this side asked"):
            receive(["heldout"], "base_", timeout_s=10)
    assert courier.problems[0] == "the progress marks were rewritten while the child ran"


def test_a_rewritten_mark_serves_no_side(tmp_path: Path, child_workdir: Path) -> None:
    job = _job(tmp_path, paired=False)
    progress = child_workdir / "progress.jsonl"
    with Courier(job, child_workdir) as courier:
        job_progress.mark("samples")
        with open(progress, "a") as handle:
            handle.write(" " * 40 + "\n")  # a blanked request, same length
        with pytest.raises(FirstSightRefused, match="asked for before"):
            receive(["sealed0", "sealed1"], "", timeout_s=10)
    assert courier.problems[0] == "the progress marks were rewritten while the child ran"


def test_no_courier_no_sets(child_workdir: Path) -> None:
    with pytest.raises(FirstSightRefused, match="within"):
        receive(["sealed0"], "", timeout_s=0.05)


def test_the_reference_seals_its_first_sight_sets(tmp_path: Path, cpu_launcher: bool) -> None:
    """Out of the inputs (no candidate process sees them), out of gates 1-3 and the
    rotation, with call seeds that do not give their input seeds back."""
    settings = GateSettings(device="cpu")
    bundle = prepare_reference(PROBLEM, settings, tmp_path / "ref")
    assert bundle.ok, bundle.outcome.describe()
    sealed = bundle.sealed_sets
    assert len(sealed) == first_sight.FIRST_SIGHT_CALLS * settings.first_sight_rounds
    files = {p.name.removesuffix(".pt") for p in bundle.inputs_dir.iterdir()}
    assert not files & set(sealed)
    assert {p.name for p in bundle.sealed_dir.iterdir()} == {f"{n}.pt" for n in sealed}
    assert not {s.name for s in bundle.input_sets} & set(sealed)
    assert not set(bundle.timing_rotation()) & (set(sealed) | set(bundle.first_sight_sets()))
    assert set(sealed) <= set(bundle.refs)  # the parent checks their calls
    assert bundle.refs64 is not None and set(sealed) <= set(bundle.refs64)  # float64 rules too
    seeds = {s.name: s.seed for s in bundle.result.input_sets}
    calls = load_policy(bundle.inputs_dir).call_seeds
    for name in sealed:
        assert calls[name] != zlib.crc32(f"{name}/{seeds[name]}".encode()) & 0x7FFFFFFF
    values = [load_values(bundle.sealed_dir / f"{n}.pt")[0] for n in sealed]
    assert all(not torch.equal(values[0], v) for v in values[1:])  # each set its own values


def test_without_timing_nothing_is_sealed(tmp_path: Path, cpu_launcher: bool) -> None:
    bundle = prepare_reference(PROBLEM, GateSettings(device="cpu", run_perf=False), tmp_path)
    assert bundle.ok and bundle.sealed_sets == []
