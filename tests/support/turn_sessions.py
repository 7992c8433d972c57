"""Turn sessions (``gates.turns``) on the CPU for tests: a small problem, candidate files, runs.

Shared by the turn-session tests: a prepared reference for a module's fixture,
both ways a child starts (spawned, or forked from the session's sandboxed
zygote); ``write_candidate`` writes a module a kernel-writing agent could write, and
``run_session`` runs one real session of two sandboxed children.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from gates.perf import RoundSetup
from gates.protocol import ModelSource
from gates.reference import ReferenceBundle, prepare_reference
from gates.runner import forking_from
from gates.turns import Observer, TurnRound, run_turn_round
from gates.zygote import Zygote
from tests.support.adversarial import cpu_suite_settings
from tests.support.marks import slow

PROBLEMS = Path(__file__).resolve().parents[1] / "problems" / "gates"
PROBLEM = PROBLEMS / "scale_one.py"
PAIRS = 4
ABBA = ["baseline", "candidate", "candidate", "baseline"] * (PAIRS // 2)  # the turns' order
SETTINGS = cpu_suite_settings().model_copy(update={"noisy_rounds": 0, "turn_pairs": PAIRS})
BASE = ModelSource(kind="eager", problem_path=str(PROBLEM))


# a candidate that writes ``end`` into every turn channel it finds beside its own and lists
# the ones it reached in reached.txt
CHANNEL_WRITER = """
import glob, os
_here = os.getcwd()
_reached = []
for _path in glob.glob(os.path.join(_here, "..", "..", "*", "work", "turn_commands")):
    if os.path.samefile(os.path.dirname(_path), _here):
        continue
    try:
        _fd = os.open(_path, os.O_WRONLY | os.O_NONBLOCK)
        os.write(_fd, b"end 0 \\n")
        os.close(_fd)
        _reached.append(_path)
    except OSError:
        pass
with open("reached.txt", "w") as _f:
    _f.write("\\n".join(_reached))
ModelNew = Model
"""

# how a test's children start: ``launching``'s parameter.  The turn logic is the same
# either way, and the spawned start of a gate child has tests of its own
# (tests/gates/test_isolation_primitives.py, tests/security), so the spawned repeats of the
# turn tests run with ``pytest -m slow`` only
LAUNCHES = [*slow("spawned"), "forked"]


def reference(factory: pytest.TempPathFactory, problem: Path = PROBLEM) -> ReferenceBundle:
    """``problem``'s prepared reference, for a module's ``bundle`` fixture."""
    return prepare_reference(problem, SETTINGS, factory.mktemp("reference"))


@contextmanager
def launching(request: pytest.FixtureRequest) -> Iterator[str]:
    """Both children of the test's sessions start as ``request.param`` says (the zygote as
    ``run_job`` finds it); skips when the forked kind has no sandboxed zygote."""
    zygote: Zygote | None = None
    if request.param == "forked":
        zygote = request.getfixturevalue("cpu_zygote")
        if zygote is None or not zygote.sandboxed:
            pytest.skip("needs the session's sandboxed CPU zygote")
    with forking_from("cpu", zygote):
        yield request.param


def write_candidate(directory: Path, body: str, problem: Path = PROBLEM) -> ModelSource:
    """A candidate module: ``problem``'s source, then ``body`` (which defines ``ModelNew``)."""
    path = directory / "candidate.py"
    path.write_text(problem.read_text() + "\n" + body)
    return ModelSource(kind="candidate", problem_path=str(problem), candidate_path=str(path))


def run_session(
    setup: RoundSetup,
    candidate: ModelSource,
    workdir: Path,
    observer: Observer | None = None,
    pairs: int = PAIRS,
    base: ModelSource = BASE,
    record_credit: bool = False,
    held_output_bytes: int | None = None,
    probe_child: bool = False,
) -> TurnRound:
    """One real turn session of ``base`` against ``candidate``; it must not fail.
    ``held_output_bytes``: the jobs' bound on the outputs a turn holds (else theirs);
    ``probe_child``: the idle probe in a third child (``GateSettings.turn_probe_child``)."""
    update = {} if held_output_bytes is None else {"held_output_bytes": held_output_bytes}
    session = run_turn_round(
        setup.turn_job(base, "baseline").model_copy(update=update),
        setup.turn_job(candidate, "candidate").model_copy(update=update),
        workdir,
        pairs=pairs,
        timeout_s=SETTINGS.timing_timeout_s,
        device="cpu",
        observer=observer,
        record_credit=record_credit,
        probe_child=probe_child,
    )
    assert session.failure is None, session.failure[1].describe() + session.failure[1].log_tail
    return session
