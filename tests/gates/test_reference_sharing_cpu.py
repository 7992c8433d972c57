"""One reference bundle for successive candidates of a problem in the campaign path (issue 22).

``gate_candidate`` runs in a fresh process per candidate; a GPU worker's
directory of kept bundles (``gates.reference_cache``) lets the next candidate
of the same problem skip the reference child.  These tests run the campaign
entry point in this process with such a directory, on the CPU.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

import gates.reference_cache as reference_cache
from gates.campaign import gate_candidate
from kernelopt.contracts import CandidateGateResult
from kernelopt.contracts.verdicts import GateName, GateSettings, GateStatus
from kernelopt.store import ArtifactStore, open_store
from tests.gates.test_campaign_cpu import _forward_input

PROBLEM = Path(__file__).resolve().parents[1] / "problems" / "gates" / "swish_bias.py"


@pytest.fixture
def store(tmp_path: Path) -> ArtifactStore:
    return open_store(tmp_path / "artifacts")


@pytest.fixture
def kept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A worker's directory of kept bundles, and a count of the reference children run."""
    root = tmp_path / "references"
    monkeypatch.setenv(reference_cache.REFERENCE_CACHE_ENV, str(root))
    return root


@pytest.fixture
def prepared(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The problem path of every reference child started, in order."""
    started: list[str] = []
    real = reference_cache.prepare_reference

    def counting(problem_path, settings, workdir, **kw):
        started.append(str(problem_path))
        return real(problem_path, settings, workdir, **kw)

    monkeypatch.setattr(reference_cache, "prepare_reference", counting)
    return started


def _gate(
    store: ArtifactStore, candidate: str, uses: int = 3, **settings: object
) -> CandidateGateResult:
    inp = _forward_input(store, candidate)
    gate_settings = GateSettings(device="cpu", reference_uses=uses, **settings)  # type: ignore[arg-type]
    return gate_candidate(inp.model_copy(update={"settings": gate_settings}), store)


def _reference(result: CandidateGateResult) -> dict:
    marks = [v.metrics["reference"] for v in result.verdicts]
    assert all(m == marks[0] for m in marks), "every verdict of one candidate names one bundle"
    return marks[0]


def test_a_bundle_judges_k_candidates_then_a_new_one_is_drawn(
    store: ArtifactStore, kept: Path, prepared: list[str], cpu_launcher: bool
) -> None:
    results = [_gate(store, "swish_fused", uses=3) for _ in range(4)]
    assert all(r.passed for r in results)
    marks = [_reference(r) for r in results]
    assert [(m["use"], m["uses"]) for m in marks] == [(1, 3), (2, 3), (3, 3), (1, 3)]
    assert marks[0]["id"] == marks[1]["id"] == marks[2]["id"] != marks[3]["id"]
    assert len(prepared) == 2  # the reference child ran for candidates 1 and 4 only
    # a reused bundle's candidate reports no reference child of its own, only its draw's
    assert ["reference_child" in r.stage_seconds for r in results] == [True, False, False, True]
    drew = ["reference_draw_child" in r.stage_seconds for r in results]
    assert drew == [False, True, True, False]
    # the spent bundle is gone; the new one is kept for the next candidate
    assert len([p for p in kept.iterdir() if p.is_dir()]) == 1


def test_other_settings_or_another_problem_get_their_own_bundle(
    store: ArtifactStore, kept: Path, prepared: list[str], cpu_launcher: bool
) -> None:
    first = _reference(_gate(store, "swish_fused"))
    other_seeds = _reference(_gate(store, "swish_fused", model_mode="eval"))
    again = _reference(_gate(store, "swish_fused"))
    assert first["id"] != other_seeds["id"] and other_seeds["use"] == 1
    assert again["id"] == first["id"] and again["use"] == 2
    assert len(prepared) == 2
    settings = GateSettings(device="cpu")
    key = reference_cache.reference_key(PROBLEM, settings)
    edited = kept.parent / "swish_bias.py"
    edited.write_text(PROBLEM.read_text().replace("1.5", "1.25"))
    assert reference_cache.reference_key(edited, settings) != key


def test_uses_of_one_turns_sharing_off(
    store: ArtifactStore, kept: Path, prepared: list[str], cpu_launcher: bool
) -> None:
    marks = [_reference(_gate(store, "swish_fused", uses=1)) for _ in range(2)]
    assert [m["use"] for m in marks] == [1, 1] and marks[0]["id"] != marks[1]["id"]
    assert len(prepared) == 2
    assert not kept.exists() or not any(kept.iterdir())


def test_a_failed_reference_is_never_kept(
    store: ArtifactStore, kept: Path, cpu_launcher: bool, tmp_path: Path
) -> None:
    from kernelopt.contracts import ProblemSpec
    from tests.support.compiled import stub_compiled

    broken = "import torch\nraise RuntimeError('the problem itself is broken')\n"
    inp = _forward_input(store, "swish_fused")
    spec = ProblemSpec(name="broken", source=store.put_text(broken, name="broken.py"))
    compiled = stub_compiled(spec, inp.compiled.wrapper)
    settings = GateSettings(device="cpu", reference_uses=3)
    with pytest.raises(Exception, match="reference could not run"):
        gate_candidate(inp.model_copy(update={"compiled": compiled, "settings": settings}), store)
    assert not any(p.is_dir() for p in kept.iterdir())


# candidates of swish_bias that gates 1-2 judge on the CPU: cheats, crashes, honest ones
GATE_2_CASES = [
    "partial_write",
    "mutate_input",
    "lazy_output",
    "id_memo",
    "patched_compare",
    "raises",
    "job_sniff",
    "swish_fused",
]


def _category(result: CandidateGateResult) -> list[tuple[GateName, GateStatus]]:
    return [(v.gate, v.status) for v in result.verdicts]


def test_verdicts_on_a_shared_bundle_match_fresh_ones(
    store: ArtifactStore, kept: Path, prepared: list[str], cpu_launcher: bool
) -> None:
    shared = [_gate(store, name, uses=len(GATE_2_CASES)) for name in GATE_2_CASES]
    assert len(prepared) == 1
    fresh = [_gate(store, name, uses=1) for name in GATE_2_CASES]
    assert [_reference(r)["use"] for r in shared] == list(range(1, len(GATE_2_CASES) + 1))
    assert [_category(r) for r in shared] == [_category(r) for r in fresh]
    assert [r.passed for r in shared] == [n in ("job_sniff", "swish_fused") for n in GATE_2_CASES]


def _probe_report(result: CandidateGateResult) -> dict:
    text = result.verdicts[0].feedback + result.verdicts[0].reason
    line = next(x for x in text.splitlines() if "PROBE {" in x)
    return json.JSONDecoder().raw_decode(line.split("PROBE ", 1)[1])[0]


def test_a_sandboxed_candidate_cannot_reach_the_shared_bundle(
    store: ArtifactStore, kept: Path, prepared: list[str], cpu_launcher: bool
) -> None:
    first = _gate(store, "swish_fused")
    (entry,) = [p for p in kept.iterdir() if p.is_dir()]
    record = json.loads((entry / "record.json").read_text())
    probe = _gate(store, "bundle_probe")
    report = _probe_report(probe)
    assert report["rewrite_input"] != "done"
    # a spawned child's view builds the bundle's path inside its private /tmp, where a
    # write may land (and vanish with the child): what counts is the host's bundle
    assert report["plant_beside_inputs"] != "done" or cpu_launcher is False
    assert not list(kept.rglob("planted.pt"))
    assert not report["refs_visible"] and not report["pristine_visible"]
    # use 2 replaced draw 0's files by draw 1's; every file it kept is as recorded
    now = json.loads((entry / "record.json").read_text())["digests"]
    assert reference_cache._digests(entry) == now
    assert {k: v for k, v in record["digests"].items() if k in now} == {
        k: v for k, v in now.items() if k in record["digests"]
    }
    after = _gate(store, "swish_fused")
    assert after.passed
    assert (_reference(after)["id"], _reference(after)["use"]) == (_reference(first)["id"], 3)
    assert len(prepared) == 1


def test_unsandboxed_a_candidate_that_rewrites_the_inputs_retires_the_bundle(
    store: ArtifactStore, kept: Path, prepared: list[str], unsandboxed: None
) -> None:
    cheat = _gate(store, "tamper_inputs")
    assert not cheat.passed
    assert cheat.verdicts[-1].metrics.get("inputs_tampered")
    assert not any(p.is_dir() for p in kept.iterdir())  # retired at once
    honest = _gate(store, "swish_fused")
    assert honest.passed and _reference(honest)["use"] == 1
    assert _reference(honest)["id"] != _reference(cheat)["id"]


def test_unsandboxed_forged_reference_outputs_are_never_used(
    store: ArtifactStore, kept: Path, prepared: list[str], unsandboxed: None
) -> None:
    forger = _gate(store, "refs_rewrite")
    assert forger.passed  # judged against the outputs already in memory
    zeros = _gate(store, "zeros_out")
    assert not zeros.passed
    assert zeros.verdicts[-1].gate == GateName.CORRECTNESS
    assert _reference(zeros)["use"] == 1  # the forged bundle was dropped, a new one drawn
    assert len(prepared) == 2


def test_feedback_on_a_shared_bundle_quotes_no_held_out_values(
    store: ArtifactStore, kept: Path, cpu_launcher: bool
) -> None:
    shared = _gate(store, "zeros_out")
    fresh = _gate(store, "zeros_out", uses=1)
    shared_text = shared.verdicts[-1].feedback
    fresh_text = fresh.verdicts[-1].feedback
    held_out = [x for x in fresh_text.splitlines() if "heldout" in x or "newvals" in x]
    assert any("expected" in x for x in held_out), fresh_text
    for line in shared_text.splitlines():
        if ("heldout" in line or "newvals" in line) and "seed0" not in line:
            assert "expected" not in line, line


def test_a_bundle_is_one_candidates_at_a_time_and_an_unclean_end_retires_it(
    kept: Path, prepared: list[str], cpu_launcher: bool, tmp_path: Path
) -> None:
    settings = GateSettings(device="cpu", reference_uses=4)
    with (
        reference_cache.shared_reference(PROBLEM, settings, tmp_path / "a") as first,
        reference_cache.shared_reference(PROBLEM, settings, tmp_path / "b") as second,
    ):
        assert first.bundle_id != second.bundle_id  # in use: the second drew its own
    with reference_cache.shared_reference(PROBLEM, settings, tmp_path / "c") as third:
        assert third.use == 2 and third.bundle_id in (first.bundle_id, second.bundle_id)
    assert len(prepared) == 2
    # a use that raised retires its bundle
    with (
        pytest.raises(RuntimeError, match="infrastructure"),
        reference_cache.shared_reference(PROBLEM, settings, tmp_path / "d") as used,
    ):
        raise RuntimeError("infrastructure fault mid-candidate")
    entries = [p for p in kept.iterdir() if p.is_dir()]
    assert len(entries) == 1  # of the two kept bundles, the one the raising use took is gone
    for entry in entries:
        record = reference_cache.KeptBundle.model_validate_json((entry / "record.json").read_text())
        # a process killed mid-use leaves its record unclean (its lease dies with it)
        (entry / "record.json").write_text(
            record.model_copy(update={"clean": False}).model_dump_json()
        )
    with reference_cache.shared_reference(PROBLEM, settings, tmp_path / "e") as fresh:
        assert fresh.use == 1 and fresh.bundle_id not in (first.bundle_id, second.bundle_id)
    assert used.bundle_id != fresh.bundle_id


# --- every use of a bundle is judged on a draw of held-out sets of its own


def _only_entry(kept: Path) -> Path:
    (entry,) = [p for p in kept.iterdir() if p.is_dir()]
    return entry


def _calls(result: CandidateGateResult) -> dict[str, dict]:
    verdict = next(v for v in result.verdicts if v.gate == GateName.CORRECTNESS)
    return {c["set"]: c for c in verdict.metrics["calls"]}


def test_successive_uses_are_judged_on_held_out_sets_no_earlier_use_saw(
    store: ArtifactStore, kept: Path, prepared: list[str], cpu_launcher: bool
) -> None:
    from gates.problem_io import load_values, set_path

    results: list[CandidateGateResult] = []
    values: list[list] = []  # each use's draw, read while the bundle still keeps it
    for _ in range(3):  # the bundle stays
        results.append(_gate(store, "swish_fused", uses=4))
        inputs = str(_only_entry(kept) / "inputs")
        drawn_now = [k for k in _calls(results[-1]) if not k.startswith("seed")]
        values.append([load_values(set_path(inputs, n))[0] for n in drawn_now])
    assert all(r.passed for r in results) and len(prepared) == 1
    marks = [_reference(r)["heldout"] for r in results]
    assert [(m["draw"], m["of"]) for m in marks] == [(0, 4), (1, 4), (2, 4)]
    assert len({m["digest"] for m in marks}) == 3
    calls = [_calls(r) for r in results]
    seeded = [{k: c["seed"] for k, c in x.items() if k.startswith("seed")} for x in calls]
    assert seeded[0] and seeded[0] == seeded[1] == seeded[2]  # the fixed sets stay shared
    drawn = [{k: c["seed"] for k, c in x.items() if k not in seeded[0]} for x in calls]
    # the first draw: plain names
    assert sorted(drawn[0]) == ["heldout", "holdout0", "newvals", "widened"]
    assert sorted(drawn[1]) == ["heldout_h1", "holdout0_h1", "newvals_h1", "widened_h1"]
    assert all(not set(a) & set(b) for a, b in [(drawn[0], drawn[1]), (drawn[1], drawn[2])])
    # no draw's inputs come back in another: independent float32 draws share a value now
    # and then by chance (that flaked once in a few runs), a reused draw shares all of them
    for i, j in [(0, 1), (0, 2), (1, 2)]:
        for a in values[i]:
            for b in values[j]:
                shared = torch.isin(a.flatten(), b.flatten()).float().mean().item()
                assert shared < 0.01, (i, j, shared)


def test_a_use_sees_only_the_seed_sets_and_its_own_draw(
    kept: Path, cpu_launcher: bool, tmp_path: Path
) -> None:
    from gates.call_policy import load_policy

    settings = GateSettings(device="cpu", reference_uses=3)
    for use in (1, 2):
        with reference_cache.shared_reference(PROBLEM, settings, tmp_path / str(use)) as bundle:
            names = {s.name for s in bundle.input_sets}
            files = {p.name for p in bundle.inputs_dir.iterdir()}
            suffix = "" if use == 1 else "_h1"
            assert {f"heldout{suffix}", f"newvals{suffix}", f"holdout0{suffix}"} <= names
            assert f"widened{suffix}" in names
            assert not any(n.endswith("_h2") or (use == 2 and n == "heldout") for n in names)
            assert {f.removesuffix(".pt") for f in files} == names | {"_weights", "_policy"}
            sealed = set(bundle.sealed_sets)  # timing's first sight: never in the view
            assert sealed and all(n.endswith(suffix) for n in sealed) and not sealed & names
            assert {p.name.removesuffix(".pt") for p in bundle.sealed_dir.glob("*.pt")} == sealed
            assert set(load_policy(bundle.inputs_dir).call_seeds) == names | sealed
            assert set(bundle.refs) == names | sealed


def test_answers_memorised_from_the_previous_use_fail_the_next(
    store: ArtifactStore, kept: Path, prepared: list[str], cpu_launcher: bool
) -> None:
    import base64
    import io

    import torch

    from gates.problem_io import load_values, set_path
    from tests.fixtures.candidates.gates.heldout_memo import input_key

    template = (
        Path(__file__).resolve().parents[1]
        / "fixtures"
        / "candidates"
        / "gates"
        / "heldout_memo.py"
    ).read_text()

    def memo_source(sets: list[str]) -> str:
        """The table an agent would have if every answer of these sets had reached it."""
        entry = _only_entry(kept)
        table = {
            input_key(load_values(set_path(str(entry / "inputs"), n))[0]): load_values(
                set_path(str(entry / "refs"), n)
            )[0]
            for n in sets
        }
        buffer = io.BytesIO()
        torch.save(table, buffer)
        return template.replace(
            'MEMO = ""', f'MEMO = "{base64.b64encode(buffer.getvalue()).decode()}"'
        )

    def gate_source(text: str) -> CandidateGateResult:
        inp = _forward_input(store, "heldout_memo")
        settings = GateSettings(device="cpu", reference_uses=3)
        source = store.put_text(text, name="c.py")
        return gate_candidate(
            inp.model_copy(update={"settings": settings, "source": source}), store
        )

    first = _gate(store, "swish_fused", uses=3)
    judged_first = list(_calls(first))  # seed sets and draw 0: what the next one could learn
    copier = gate_source(memo_source(judged_first))
    assert _reference(copier)["use"] == 2 and _reference(copier)["heldout"]["draw"] == 1
    assert not copier.passed
    failing = copier.verdicts[-1]
    assert failing.gate == GateName.CORRECTNESS
    wrong = {k for k, c in _calls(copier).items() if not c["ok"]}
    # every seed set still matched: the table works for the sets it holds (the control; the
    # draw a use is judged on is made when that use begins, so no table can hold it)
    assert wrong == {"heldout_h1", "newvals_h1", "widened_h1", "holdout0_h1"}
    assert len(prepared) == 1


def test_a_bundle_retires_when_its_draws_are_used_up(
    kept: Path, prepared: list[str], cpu_launcher: bool, tmp_path: Path
) -> None:
    settings = GateSettings(device="cpu", reference_uses=2)
    for use in (1, 2):
        with reference_cache.shared_reference(PROBLEM, settings, tmp_path / str(use)) as bundle:
            assert (bundle.use, bundle.draw, bundle.draws) == (use, use - 1, 2)
    assert not any(p.is_dir() for p in kept.iterdir())  # both draws judged: gone
    with reference_cache.shared_reference(PROBLEM, settings, tmp_path / "3") as bundle:
        assert bundle.use == 1
    # a record rewound to an earlier use would judge a draw again: retired, a fresh one drawn
    entry = _only_entry(kept)
    record = reference_cache.KeptBundle.model_validate_json((entry / "record.json").read_text())
    (entry / "record.json").write_text(record.model_copy(update={"draws": 2}).model_dump_json())
    with reference_cache.shared_reference(PROBLEM, settings, tmp_path / "4") as bundle:
        assert bundle.use == 1 and bundle.draw == 0
    assert not entry.exists()
    assert len(prepared) == 3


# --- draws are made lazily: one per use, when that use begins


@pytest.fixture
def reference_jobs(monkeypatch: pytest.MonkeyPatch) -> list:
    """Every reference child's job, in order (first runs and draw-only runs alike)."""
    import gates.reference

    jobs: list = []
    real = gates.reference.run_job

    def recording(job, workdir, **kw):
        jobs.append(job)
        return real(job, workdir, **kw)

    monkeypatch.setattr(gates.reference, "run_job", recording)
    return jobs


def _seeded(settings: GateSettings) -> set[str]:
    return {f"seed{s}" for s in settings.seeds}


def _kept_sets(entry: Path) -> set[str]:
    """The input sets whose files a kept bundle holds (inputs, pristine copy, outputs)."""
    return {
        reference_cache._set_name(p.name)
        for d in ("inputs", "inputs.pristine", "refs", "sealed")
        for p in (entry / d).glob("*.pt")
    } - {"_weights", "_policy"}


def test_a_new_bundle_draws_once_like_an_unshared_reference(
    kept: Path, reference_jobs: list, cpu_launcher: bool, tmp_path: Path
) -> None:
    settings = GateSettings(device="cpu", reference_uses=8)
    with reference_cache.shared_reference(PROBLEM, settings, tmp_path / "1") as bundle:
        assert (bundle.use, bundle.draw, bundle.draws) == (1, 0, 8)
    (job,) = reference_jobs
    assert job.draw_only is None
    assert {s.group for s in job.input_sets} == {-1, 0} and len(job.holdout_seeds) == 1
    names = {s.name for s in bundle.input_sets}
    assert names == _seeded(settings) | {"heldout", "newvals", "widened", "holdout0"}
    sealed = {f"sealed{k}" for k in range(4)}
    assert set(bundle.sealed_sets) == sealed
    assert _kept_sets(_only_entry(kept)) == names | sealed  # nothing drawn ahead for later uses


def test_use_two_draws_its_own_sets_alone_and_drops_the_first_draw(
    kept: Path, reference_jobs: list, prepared: list[str], cpu_launcher: bool, tmp_path: Path
) -> None:
    settings = GateSettings(device="cpu", reference_uses=3)
    with reference_cache.shared_reference(PROBLEM, settings, tmp_path / "1") as first:
        first_seeds = first.seeds_used
    with reference_cache.shared_reference(PROBLEM, settings, tmp_path / "2") as second:
        assert (second.use, second.draw, second.bundle_id) == (2, 1, first.bundle_id)
        assert second.draw_outcome is not None and second.draw_outcome.ok
        view = {reference_cache._set_name(p.name) for p in second.inputs_dir.glob("*.pt")}
        entry = _only_entry(kept)
        kept_now = _kept_sets(entry)
        seeds = {s.name: s.seed for s in second.result.input_sets}  # the sealed too
    assert len(prepared) == 1 and len(reference_jobs) == 2
    job = reference_jobs[1]
    assert job.draw_only is not None and job.draw_only.draw == 1
    assert {s.group for s in job.input_sets} == {1} and not job.count_flops
    sealed = [f"sealed{k}_h1" for k in range(4)]
    assert [s.name for s in job.input_sets] == ["heldout_h1", "newvals_h1", "widened_h1", *sealed]
    assert job.input_sets[1].reuse_buffers_of == "heldout_h1"
    drawn = {"heldout_h1", "newvals_h1", "widened_h1", "holdout0_h1", *sealed}
    seeded = _seeded(settings)
    assert view == seeded | drawn - set(sealed) | {"_weights", "_policy"}  # nothing of group 0
    assert kept_now == seeded | drawn  # the first draw's files are gone
    assert {k: seeds[k] for k in seeded} == {k: first_seeds[k] for k in seeded}
    assert not {seeds[n] for n in drawn} & set(first_seeds.values())
    # what the next use checks before its draw: every kept file named in the record
    record = reference_cache.KeptBundle.model_validate_json((entry / "record.json").read_text())
    assert record.draws == 2 and reference_cache._digests(entry) == record.digests


@pytest.mark.parametrize("fault", ["policy", "child"])
def test_a_draw_that_disagrees_retires_the_bundle_and_a_fresh_reference_judges(
    store: ArtifactStore,
    kept: Path,
    prepared: list[str],
    cpu_launcher: bool,
    monkeypatch: pytest.MonkeyPatch,
    fault: str,
) -> None:
    from structlog.testing import capture_logs

    real = reference_cache.prepare_draw

    def disagreeing(*args, **kw):
        outcome, drawn = real(*args, **kw)
        if fault == "child" or drawn is None:
            return outcome, None
        policy = drawn.policy.model_copy(update={"stateful": ["bias"]})
        return outcome, drawn.model_copy(update={"policy": policy})

    first = _reference(_gate(store, "swish_fused", uses=3))
    monkeypatch.setattr(reference_cache, "prepare_draw", disagreeing)
    with capture_logs() as logs:
        result = _gate(store, "swish_fused", uses=3)
    assert result.passed
    mark = _reference(result)
    assert mark["use"] == 1 and mark["id"] != first["id"]  # a fresh full reference judged it
    assert "reference_child" in result.stage_seconds
    assert len(prepared) == 2
    (rejected,) = [x for x in logs if x["event"] == "reference_cache.draw_rejected"]
    assert rejected["draw"] == 1
    if fault == "policy":
        assert "stateful ['bias'] instead of []" in rejected["why"]
    (entry,) = [p for p in kept.iterdir() if p.is_dir()]  # the old one retired, the new kept
    record = reference_cache.KeptBundle.model_validate_json((entry / "record.json").read_text())
    assert record.bundle_id == mark["id"]


def test_a_draw_child_sees_no_kept_file_but_the_weights_read_only(tmp_path: Path) -> None:
    """A sandboxed child's writable directories are copied into its view and back: a draw's
    child writes into empty ones (the parent moves its files in), so the kept bundle is
    neither copied nor exposed; only the weights file, read-only."""
    from gates.jobs.build import WEIGHTS_FILE
    from gates.protocol import DrawOnly
    from gates.reference import _reference_job, plan_draw
    from gates.sandbox import job_view

    settings = GateSettings(device="cpu")
    entry = tmp_path / "entry"
    planned = plan_draw(settings, 1, set())
    job = _reference_job(PROBLEM, settings, entry, planned, DrawOnly(draw=1))
    view = job_view(json.loads(job.model_dump_json()), tmp_path / "run")
    assert set(view.rw) == {tmp_path / "run", entry / "draw.inputs", entry / "draw.refs"}
    assert entry / "inputs" / WEIGHTS_FILE in view.ro
    kept = {entry / d for d in ("inputs", "inputs.pristine", "refs")}
    assert not kept & set(view.rw + view.ro)
