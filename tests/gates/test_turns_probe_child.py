"""A turn session's probe child (``GateSettings.turn_probe_child``): the idle probe in a third child.

Real sessions of sandboxed children on the CPU, as in ``test_turns.py``.  The
probe child runs the baseline's job without building its model: it answers
every probe, before each turn of either side, and its answers are charged to
the turn before; it is stopped outside its probes, its channel is sealed before
the candidate starts, and its death fails the round as the infrastructure's,
never as the candidate's.  On the CPU a probe waits for nothing (0 ns): the
tests that need a charge give the parent's reading of it a known value.
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import gates.turns as turns
from gates.cascade import round_setup
from gates.perf import RoundSetup, measure
from gates.perf_verdict import perf_verdict
from gates.proctree import HostTree, tree
from gates.protocol import ModelSource
from gates.reference import ReferenceBundle
from gates.runner import forking_from
from gates.zygote import Zygote
from kernelopt.contracts.verdicts import GateStatus
from tests.support.marks import forked_children
from tests.support.turn_sessions import (
    ABBA,
    BASE,
    CHANNEL_WRITER,
    PAIRS,
    PROBLEM,
    SETTINGS,
    reference,
    run_session,
    write_candidate,
)

pytestmark = forked_children  # how a child starts is not what these tests check

# the shared problem, and a file in the importing child's workdir: who imported it
MARKED = PROBLEM.read_text() + '\nopen(f"problem_imported.{os.getpid()}", "w").close()\n'


@pytest.fixture(scope="module")
def marked(gates_env: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("marked") / "marked_scale_one.py"
    path.write_text(MARKED)
    return path


@pytest.fixture(scope="module")
def marked_bundle(
    marked: Path, cpu_zygote: Zygote | None, tmp_path_factory: pytest.TempPathFactory
) -> ReferenceBundle:
    with forking_from("cpu", cpu_zygote):
        return reference(tmp_path_factory, marked)


@pytest.fixture
def commands(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[tuple[str, str]]]:
    """Every command the parent sends, as (child's side, word), in order."""
    sent: list[tuple[str, str]] = []
    command = turns.TurnChild.command

    def logged(self: turns.TurnChild, word: str, arg: str = "") -> str:
        sent.append((self.side, word))
        return command(self, word, arg)

    monkeypatch.setattr(turns.TurnChild, "command", logged)
    yield sent


def test_an_identity_session_with_a_probe_child_gives_ratios_and_the_child_builds_nothing(
    marked: Path, marked_bundle: ReferenceBundle, tmp_path: Path, launch: str
) -> None:
    setup = round_setup(marked_bundle, SETTINGS)
    base = ModelSource(kind="eager", problem_path=str(marked))
    identity = write_candidate(tmp_path, "ModelNew = Model\n", problem=marked)
    session = run_session(setup, identity, tmp_path / "s", base=base, probe_child=True)
    assert session.probe_child and len(session.ratios) == PAIRS
    assert all(r > 0 for r in session.ratios)
    assert [side for side, _ in session.turns] == ABBA
    assert set(session.outcomes) == {"baseline", "candidate", "probe"}
    assert list(session.phases_s)[:3] == ["baseline_warmed", "probe_warmed", "candidate_warmed"]
    # the marker works: both sides imported the problem; the probe child never did
    dirs = {side: tmp_path / "s" / side for side in ("baseline", "candidate", "probe")}
    assert list(dirs["baseline"].glob("problem_imported.*"))
    assert list(dirs["candidate"].glob("problem_imported.*"))
    assert not list(dirs["probe"].glob("problem_imported.*"))
    # nor built anything: its only phase after loading its job is the probe's
    probe = session.outcomes["probe"]
    assert probe.ok and probe.phases == ["load_job", "probe"], probe.phases
    assert probe.result is not None and probe.result["side"] == "probe"


def test_the_probe_child_answers_before_every_turn_and_is_charged_to_the_turn_before(
    setup: RoundSetup, tmp_path: Path, commands: list[tuple[str, str]], monkeypatch
) -> None:
    """The n-th probe reads (n + 1) s more than it waited: each turn's window holds the one
    after it, so a probe's answer lands in the turn it follows, whichever side's."""
    number = turns.TurnChild.number
    answered: list[float] = []

    def marked_number(self: turns.TurnChild, word: str, seq: str, timeout_s: float) -> float:
        value = number(self, word, seq, timeout_s)
        if word == "probed":
            assert self.side == "probe"  # never the baseline's
            value += (len(answered) + 1) * 1e9
            answered.append(value)
        return value

    monkeypatch.setattr(turns.TurnChild, "number", marked_number)
    identity = write_candidate(tmp_path, "ModelNew = Model\n")
    session = run_session(setup, identity, tmp_path / "s", probe_child=True)
    # a probe before every turn, calibration ones too, and one after the last, all the
    # probe child's; the sides get none
    words = [(side, word) for side, word in commands if word in ("probe", "turn")]
    assert all(side == "probe" for side, word in words if word == "probe")
    turns_at = [i for i, (_, word) in enumerate(words) if word == "turn"]
    assert len(turns_at) == turns.CALIBRATION_TURNS + 2 * PAIRS
    for i in turns_at:
        assert words[i - 1] == ("probe", "probe"), words
    assert words[-1] == ("probe", "probe")
    # the pairs' probes (before each timed turn, and after the last) are what was recorded
    assert [w * 1e6 for w in session.probe_waits_ms] == pytest.approx(answered[-(2 * PAIRS + 1) :])
    for k, (side, window) in enumerate(session.windows_ms):
        after = session.probe_waits_ms[k + 1]  # the probe that follows turn k
        assert 0 < window - after < 1000.0, (side, k, window, after)


def test_the_probe_child_is_stopped_and_pinned_outside_its_probes(
    setup: RoundSetup, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Spawned (host PIDs): whenever a side is in its turn (its ``synced`` just came) and at
    each turn's edges, every process of the probe child's tree is stopped, on the turns' CPU."""
    states: list[tuple[str, set[str], set[int]]] = []
    sessions: list[turns._Session] = []
    init = turns._Session.__init__

    def kept(self: turns._Session, *args, **kwargs) -> None:
        init(self, *args, **kwargs)
        sessions.append(self)

    def look(side: str) -> None:
        prober = sessions[-1].prober
        assert prober is not None and isinstance(prober.tree, HostTree)
        pids = tree(prober.tree.root)
        assert pids
        seen = set()
        for pid in pids:
            stat = Path(f"/proc/{pid}/stat").read_text()
            seen.add(stat.rsplit(")", 1)[1].split()[0])
        cpus = {c for pid in pids for c in os.sched_getaffinity(pid)}
        states.append((side, seen, cpus))

    answer = turns.TurnChild.answer

    def watched(self: turns.TurnChild, word: str, seq: str | None, timeout_s: float):
        fields = answer(self, word, seq, timeout_s)
        if word == "synced" and sessions and sessions[-1].out.cpu is not None:
            look(self.side)  # the side runs now, mid-turn
        return fields

    monkeypatch.setattr(turns._Session, "__init__", kept)
    monkeypatch.setattr(turns.TurnChild, "answer", watched)
    identity = write_candidate(tmp_path, "ModelNew = Model\n")
    with forking_from("cpu", None):  # spawned: the host sees the probe child's PIDs
        session = run_session(
            setup, identity, tmp_path / "s", observer=lambda side, _: look(side), probe_child=True
        )
    assert len(states) == 2 * PAIRS * 2 + turns.CALIBRATION_TURNS + 2 * PAIRS
    for side, seen, cpus in states:
        assert seen <= {"T", "t"}, (side, seen)
        assert cpus == {session.cpu}, (side, cpus)


def test_a_candidate_finds_no_channel_of_the_probe_childs_to_write_into(
    setup: RoundSetup, tmp_path: Path, launch: str
) -> None:
    """Forked, the children see each other's stages: the probe child's FIFOs are unlinked
    before the candidate's ``start``, as the baseline's are."""
    candidate = write_candidate(tmp_path, CHANNEL_WRITER)
    run_session(setup, candidate, tmp_path / "session", probe_child=True)
    assert (tmp_path / "session" / "candidate" / "reached.txt").read_text() == ""


def test_a_probe_child_that_dies_fails_the_round_as_the_infrastructures(
    setup: RoundSetup, tmp_path: Path, commands: list[tuple[str, str]], monkeypatch, launch: str
) -> None:
    """Killed at its third probe (the first calibration turn's): the round fails, charged to
    the baseline side (an infrastructure error), not to the candidate."""
    command = turns.TurnChild.command  # the logging one

    def kills(self: turns.TurnChild, word: str, arg: str = "") -> str:
        if self.side == "probe" and word == "probe" and commands.count(("probe", "probe")) == 2:
            self.kill()  # a zygote's kill has no acknowledgement: wait until it is gone
            deadline = time.monotonic() + 30.0
            while self.alive() and time.monotonic() < deadline:
                time.sleep(0.01)
        return command(self, word, arg)

    monkeypatch.setattr(turns.TurnChild, "command", kills)
    settings = setup.settings.model_copy(update={"turn_probe_child": True})
    candidate = write_candidate(tmp_path, "ModelNew = Model\n")
    m = measure(
        BASE, candidate, dataclasses.replace(setup, settings=settings), workdir=tmp_path / "t"
    )
    assert m.failure is not None
    side, outcome = m.failure
    assert side == "baseline" and not outcome.ok
    v4, _, _ = perf_verdict(m, settings=settings, gamma=settings.gamma, roofline=None)
    assert v4.status == GateStatus.ERROR and v4.metrics.get("infrastructure") is True
    assert v4.metrics["failed_side"] == "baseline"


def test_the_setting_is_off_by_default_and_reaches_the_session(
    setup: RoundSetup, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import gates.perf as perf

    assert SETTINGS.turn_probe_child is False
    seen: list[bool] = []

    def turn_round(*_a, probe_child: bool = False, **_k):
        seen.append(probe_child)
        raise RuntimeError("enough")

    monkeypatch.setattr(perf, "run_turn_round", turn_round)
    for on in (False, True):
        settings = setup.settings.model_copy(update={"turn_probe_child": on})
        with pytest.raises(RuntimeError, match="enough"):
            dataclasses.replace(setup, settings=settings).turn_round(BASE, BASE, tmp_path / "x")
    assert seen == [False, True]
