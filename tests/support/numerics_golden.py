"""Golden reports of gates 2 and 3's comparisons: checked by the tests, written once from an oracle.

``tests/gates/test_numerics_fast.py`` compares every report ``gates.numerics`` gives
with the one stored under ``tests/fixtures/numerics/`` (one JSON file per test: its
distinct reports, and per parametrization the order it asks for them), field by
field, floats bit for bit.  The inputs are not stored: the tests draw them again
from their seeds.

The reports were written by the straightforward rules (every rule spelled out over
whole float64 copies), the frozen ``tests/support/numerics_before.py`` that lived at
``ORACLE_REV``.  To write them again, from the oracle at a revision (needs git)::

    python -m tests.support.numerics_golden [--rev REV]

which runs the tests with ``NUMERICS_GOLDEN_REV`` set: each check then asks the
oracle, records its answer, and still asserts that the current code agrees.
The tests never need this module's writing half.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from types import ModuleType
from typing import Any

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "fixtures" / "numerics"
ORACLE_PATH = "tests/support/numerics_before.py"
ORACLE_REV = "905244c4f2c7658362ab9c7d07f0526cbeb1f465"  # the last commit that holds the oracle
ENV = "NUMERICS_GOLDEN_REV"


def same(a: Any, b: Any) -> bool:
    """Equal, floats bit for bit (0.0 does not equal -0.0), except that NaN equals any NaN.

    JSON keeps no sign of a NaN (a ``rho`` of inf/inf is one), and none means anything.
    """
    if isinstance(a, float) and isinstance(b, float):
        if a != a or b != b:
            return a != a and b != b
        return a == b and math.copysign(1, a) == math.copysign(1, b)
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and a == b


def outcome(fn: Any, *args: Any, **kwargs: Any) -> Any:
    """A report as plain data, or ``["raised", name]``: the old rules raise on some inputs."""
    try:
        return fn(*args, **kwargs).as_dict()
    except Exception as exc:
        return ["raised", type(exc).__name__]


def load_oracle(rev: str, chunk: int) -> ModuleType:
    """The oracle module as it was at ``rev``, comparing in chunks of ``chunk`` elements."""
    source = subprocess.run(
        ["git", "-C", str(REPO), "show", f"{rev}:{ORACLE_PATH}"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    with tempfile.TemporaryDirectory(prefix="numerics-oracle-") as tmp:
        path = Path(tmp) / "numerics_oracle.py"
        path.write_text(source)
        spec = importlib.util.spec_from_file_location("numerics_oracle", path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules["numerics_oracle"] = module  # dataclasses look their module up
        spec.loader.exec_module(module)
    module._CHUNK = chunk  # its sums are per-chunk sums added in order
    return module


class Golden:
    """The expected reports of one test (one parametrization), in the order it asks for them.

    Checking: ``expected`` hands out the stored reports one by one, and ``close``
    asserts that all were asked for.  Recording: ``expected`` asks the oracle and
    ``close`` stores what it said.
    """

    def __init__(self, test: str, case: str, oracle: ModuleType | None) -> None:
        self.path = FIXTURES / f"{test}.json"
        self.case = case
        self.oracle = oracle
        self.reports: list[Any] = []
        if oracle is None:
            stored = _load(self.path)
            assert case in stored, f"no golden reports for {test}[{case}]: {__doc__}"
            self.reports = stored[case]
        self._next = 0

    def expected(self, name: str, *args: Any, **kwargs: Any) -> Any:
        """The report ``numerics.<name>(*args, **kwargs)`` must give (without ``facts``)."""
        if self.oracle is not None:
            self.reports.append(outcome(getattr(self.oracle, name), *args, **kwargs))
        assert self._next < len(self.reports), f"{self.case}: more reports asked than stored"
        self._next += 1
        return self.reports[self._next - 1]

    def close(self) -> None:
        """Checking: every stored report was compared.  Recording: store them."""
        assert self._next == len(self.reports), f"{self.case}: {self._next} of {len(self.reports)}"
        if self.oracle is None:
            return
        stored = _load(self.path)
        stored[self.case] = self.reports
        _store(self.path, stored)


def _load(path: Path) -> dict[str, list[Any]]:
    """Every case's reports of one file (empty when there is none yet)."""
    if not path.exists():
        return {}
    data = json.loads(path.read_text())
    return {case: [data["reports"][i] for i in order] for case, order in data["cases"].items()}


def _store(path: Path, cases: dict[str, list[Any]]) -> None:
    """Each distinct report once, one a line, and every case as indices into them.

    Boundary cases repeat the same reports many times over; listing them once keeps
    the files small and their diffs readable.
    """
    distinct: dict[str, int] = {}
    order = {
        case: [distinct.setdefault(_compact(r), len(distinct)) for r in reports]
        for case, reports in sorted(cases.items())
    }
    body = ",\n".join(f"{json.dumps(case)}:{json.dumps(ix)}" for case, ix in order.items())
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text('{"cases":{\n' + body + '\n},\n"reports":[\n' + ",\n".join(distinct) + "\n]}\n")


def _compact(report: Any) -> str:
    """One report on one line, keys in their dataclass order."""
    return json.dumps(report, separators=(",", ":"))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rev", default=ORACLE_REV, help="the revision whose oracle answers")
    args = parser.parse_args()
    for old in FIXTURES.glob("*.json"):
        old.unlink()
    env = {**os.environ, ENV: args.rev}
    test = "tests/gates/test_numerics_fast.py"
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-n", "0", "-p", "no:randomly", test],
        cwd=REPO,
        env=env,
        check=False,
    ).returncode


if __name__ == "__main__":
    sys.exit(main())
