"""run_suite: outcomes written per problem, resumable, errors retried, progress shown."""

from __future__ import annotations

import asyncio
import io
from pathlib import Path

import pytest
from rich.console import Console

from kernelopt.bench.results import load_errors, load_results
from kernelopt.bench.runner import run_suite
from kernelopt.contracts import Outcome, OutcomeCategory
from tests.support.bench_outcomes import outcome, write_suite


class FakeCampaigns:
    """Test double for the Temporal-backed start_campaign: records calls, can fail some."""

    def __init__(self, fail: set[str] | None = None, delay: float = 0.0) -> None:
        self.calls: list[tuple[str, int | None]] = []
        self.fail = fail or set()
        self.delay = delay
        self.in_flight = 0
        self.max_in_flight = 0

    async def __call__(self, path: Path, level: int | None) -> Outcome:
        self.calls.append((path.stem, level))
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            await asyncio.sleep(self.delay)
            if path.stem in self.fail:
                raise RuntimeError(f"worker lost while running {path.stem}")
            return outcome(path.stem, OutcomeCategory.OPTIMIZED, 1.5 + (level or 0))
        finally:
            self.in_flight -= 1


def _suite(tmp_path: Path) -> Path:
    return write_suite(tmp_path / "suite", {"level1": ["1_a", "2_b"], "level2": ["1_c"]})


async def test_writes_outcomes_and_resumes(tmp_path: Path) -> None:
    suite, results = _suite(tmp_path), tmp_path / "results"
    first = FakeCampaigns(fail={"2_b"})
    run = await run_suite(suite, results, first, progress=False)
    assert sorted(first.calls) == [("1_a", 1), ("1_c", 2), ("2_b", 1)]
    assert sorted(run.ran) == ["level1/1_a", "level2/1_c"]
    assert set(run.errors) == {"level1/2_b"} and "worker lost" in run.errors["level1/2_b"]
    assert not run.complete
    assert (results / "level1" / "1_a.json").is_file()
    assert not (results / "level1" / "2_b.json").exists()  # failures are not faked as outcomes
    stored = Outcome.model_validate_json((results / "level2" / "1_c.json").read_text())
    assert stored.speedup == 3.5
    # the failure is kept for the report (named there, in no count), not only logged
    assert set(load_errors(results)) == {"level1/2_b"}
    assert "worker lost" in load_errors(results)["level1/2_b"]
    assert len(load_results(results)) == 2  # the error record is not read as an outcome

    second = FakeCampaigns()
    run2 = await run_suite(suite, results, second, progress=False)
    assert second.calls == [("2_b", 1)]  # only the unfinished problem runs again
    assert sorted(run2.skipped) == ["level1/1_a", "level2/1_c"]
    assert run2.complete
    assert load_errors(results) == {}  # its success cleared the record
    assert [(r.level, r.name) for r in run2.results] == [(1, "1_a"), (1, "2_b"), (2, "1_c")]

    third = FakeCampaigns()
    run3 = await run_suite(suite, results, third, progress=False)
    assert third.calls == [] and len(run3.results) == 3


async def test_corrupt_result_is_rerun(tmp_path: Path) -> None:
    suite, results = _suite(tmp_path), tmp_path / "results"
    await run_suite(suite, results, FakeCampaigns(), progress=False)
    (results / "level1" / "1_a.json").write_text('{"truncated": ')
    again = FakeCampaigns()
    await run_suite(suite, results, again, progress=False)
    assert again.calls == [("1_a", 1)]
    assert (
        Outcome.model_validate_json((results / "level1" / "1_a.json").read_text()).problem == "1_a"
    )


async def test_load_results_reads_levels_from_folders(tmp_path: Path) -> None:
    suite, results = _suite(tmp_path), tmp_path / "results"
    await run_suite(suite, results, FakeCampaigns(), progress=False)
    loaded = load_results(results)
    assert sorted((r.level, r.name, r.outcome.speedup) for r in loaded) == [
        (1, "1_a", 2.5),
        (1, "2_b", 2.5),
        (2, "1_c", 3.5),
    ]
    assert not list(results.rglob(".*.tmp"))  # atomic writes leave no temp files


async def test_concurrency_limit(tmp_path: Path) -> None:
    suite = write_suite(tmp_path / "suite", {"": [f"p{i}" for i in range(6)]})
    fake = FakeCampaigns(delay=0.02)
    run = await run_suite(suite, tmp_path / "r", fake, progress=False, concurrency=2)
    assert len(run.ran) == 6 and fake.max_in_flight == 2
    assert all(level is None for _, level in fake.calls)


async def test_progress_display(tmp_path: Path) -> None:
    buf = io.StringIO()
    console = Console(file=buf, force_terminal=False, width=120)
    await run_suite(
        _suite(tmp_path), tmp_path / "r", FakeCampaigns(), progress=True, console=console
    )
    text = buf.getvalue()
    assert "bench" in text and "3/3" in text


async def test_no_campaign_starts_after_the_start_window(tmp_path: Path) -> None:
    """A lease that ends soon: running campaigns finish, unstarted ones wait for next time."""
    suite = write_suite(tmp_path / "suite", {"": [f"p{i}" for i in range(5)]})
    results = tmp_path / "r"
    fake = FakeCampaigns(delay=0.3)
    run = await run_suite(suite, results, fake, progress=False, concurrency=2, start_within=0.1)
    assert sorted(run.ran) == ["p0", "p1"] and run.deferred == ["p2", "p3", "p4"]
    assert run.complete  # deferred is not failed: nothing goes to errors/
    assert not load_errors(results) and len(load_results(results)) == 2
    again = await run_suite(suite, results, FakeCampaigns(), progress=False)
    assert sorted(again.ran) == ["p2", "p3", "p4"] and not again.deferred


async def test_a_negative_start_window_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="start_within"):
        await run_suite(_suite(tmp_path), tmp_path / "r", FakeCampaigns(), start_within=-1)


def test_the_cli_takes_a_start_window_in_seconds(capsys: pytest.CaptureFixture[str]) -> None:
    from kernelopt.cli.parser import build_parser

    args = build_parser().parse_args(["bench", "problems", "--start-within", "300"])
    assert args.start_within == 300.0
    for bad in ("-5", "soon", "nan"):
        with pytest.raises(SystemExit):
            build_parser().parse_args(["bench", "problems", "--start-within", bad])
        assert "--start-within" in capsys.readouterr().err
