"""`kernelopt bench` end to end: real server and workflows, GPU doubles on two GPU workers.

Three problems at two campaigns at a time; every outcome lands in the results
folder with the report, and a second run skips them all (resumable).
"""

from __future__ import annotations

import asyncio
import io
import shutil
from pathlib import Path

from rich.console import Console

from kernelopt.bench.costs import export_costs
from kernelopt.bench.results import load_results, load_runs
from kernelopt.cli.bench import bench_command
from kernelopt.client import connect
from kernelopt.contracts import CampaignOptions, ProposerConfig, ProposerKind, SearchParams
from tests.durability.support import PROBLEM, DevServer, double_workers
from tests.support.temporal import make_settings


async def test_bench_runs_a_suite_two_at_a_time_and_resumes(tmp_path: Path) -> None:
    settings = make_settings(tmp_path / "home")
    suite = tmp_path / "suite"
    (suite / "level1").mkdir(parents=True)
    for name in ("001_alpha.py", "002_beta.py"):
        shutil.copy(PROBLEM, suite / "level1" / name)
    # no campaign can run it (its shape follows the seed): failed with the reason, never sent
    (suite / "level1" / "003_varying.py").write_text(
        "import random\nimport torch\n\n\nclass Model(torch.nn.Module):\n"
        "    def forward(self, x):\n        return x * 2\n\n\n"
        "def get_inputs():\n    return [torch.randn(random.randint(2, 60))]\n\n\n"
        "def get_init_inputs():\n    return []\n"
    )
    results = tmp_path / "results"
    # a cluster-style address: bench must not start local workers of its own
    remote = settings.model_copy(update={"temporal_address": settings.address})
    server = DevServer(settings).start()
    try:
        with double_workers(settings, tmp_path / "logs", "0.05", gpus=2) as (cpu_q, gpu_q):
            options = CampaignOptions(
                search=SearchParams(iterations=1, plans=1, beam=1),
                proposer=ProposerConfig(kind=ProposerKind.BUILTIN),
                cpu_queue=cpu_q,
                gpu_queue=gpu_q,
            )
            client = await connect(remote, start_embedded=False)
            first, second = io.StringIO(), io.StringIO()

            async def bench(log: io.StringIO, timeout: float, **kw: int) -> int:
                console = Console(file=log, width=200)
                run = bench_command(client, remote, suite, results, options, console=console, **kw)
                return await asyncio.wait_for(run, timeout)

            rc = await bench(first, 240, concurrency=2)
            rc_again = await bench(second, 60)
            found = await export_costs(client, results, tmp_path / "costs")
    finally:
        server.stop()

    assert rc == 1, first.getvalue()
    assert "2 campaign(s) at a time" in first.getvalue()
    assert "2 run, 0 already done, 1 failed" in first.getvalue()
    assert "other inputs under other seeds" in " ".join(first.getvalue().split())
    finished = load_results(results)
    assert sorted((r.level, r.name) for r in finished) == [
        (1, "001_alpha"),
        (1, "002_beta"),
    ]
    assert all(r.outcome.candidates_tried >= 1 for r in finished)
    assert any(results.glob("*.md")) and any(results.glob("*.html"))
    # resumable: the second run finds every outcome and starts nothing
    assert rc_again == 1, second.getvalue()
    assert "0 run, 2 already done, 1 failed" in second.getvalue()
    assert "1 campaign(s) at a time" in second.getvalue()  # not embedded: no local GPU count
    # the cost table the device runs read: every problem's activities, gate stages included
    assert found == 2  # the varying problem's campaign never started
    table = (tmp_path / "costs" / "activity_durations.txt").read_text()
    assert table.count("gate_candidate") >= 2 and "compile" in table
    assert not (tmp_path / "costs" / "histories").exists()
    # both invocations are on record, and the report states their settings once
    runs = load_runs(results)
    assert len(runs) == 2 and runs[0].suite_problems == 3
    report = (results / "report.md").read_text()
    assert "- **problems finished**: 2 of 3 (PARTIAL: 1 failed)\n" in report
    assert "- **search**: proposer builtin (no LLM); 1 iteration(s), 1 plan(s), beam 1" in report


def test_report_only_reads_a_partial_suite_without_a_server(tmp_path: Path) -> None:
    from kernelopt.bench.results import BenchRun, record_error, record_run, save_outcome
    from kernelopt.bench.suite import discover_suite
    from kernelopt.cli import main
    from kernelopt.cli.bench import search_settings
    from tests.support.bench_outcomes import outcome

    suite = tmp_path / "suite"
    (suite / "level1").mkdir(parents=True)
    for name in ("001_alpha.py", "002_beta.py", "003_gamma.py"):
        shutil.copy(PROBLEM, suite / "level1" / name)
    results = tmp_path / "results"
    first = discover_suite(suite)[0]
    save_outcome(results, first, outcome(first.name, "optimized", 1.5, f=0.0))
    builtin = CampaignOptions(search=SearchParams(iterations=1, plans=2))
    llm = builtin.model_copy(
        update={"proposer": ProposerConfig(kind=ProposerKind.LLM, base_url="http://h/v1")}
    )
    record_error(results, "level1/003_gamma", "ProblemError: does not fit in GPU memory")
    for opts in (builtin, builtin, llm):
        record_run(
            results, BenchRun(started_at="t", suite_problems=3, search=search_settings(opts))
        )
    # no server address is reachable here: --report-only must not need one
    rc = main(["bench", str(suite), "--results", str(results), "--report-only"])
    assert rc == 0
    report = (results / "report.md").read_text()
    assert "- **problems finished**: 1 of 3 (PARTIAL: 1 failed, 1 not run yet)" in report
    assert "- **search**: MIXED: proposer builtin (no LLM); 1 iteration(s), 2 plan(s)" in report
    assert "; proposer LLM gpt-4o @ http://h/v1; 1 iteration(s)" in report
    assert "| 1 | 001_alpha | optimized | 1.500x |" in report
    assert "- **problems failed**: 1 on their last attempt (listed at the end)" in report
    # every table says what its speedups are over
    assert report.count("-- speedups over torch.compile `max-autotune-no-cudagraphs`") == 3
    assert "| level1/003_gamma | ProblemError: does not fit in GPU memory |" in report
    assert "ProblemError: does not fit in GPU memory" in (results / "report.html").read_text()
    # the report's own summary JSON, now beside the outcomes, is not read back as a problem
    assert (results / "report.summary.json").is_file()
    assert [r.name for r in load_results(results)] == ["001_alpha"]


def test_the_unseen_set_reports_as_its_own_suite(tmp_path: Path) -> None:
    """``kernelopt bench problems/unseen --results R`` counts the unseen set alone (10), and
    its flat outcomes are read back; the level suite's count is not touched by it."""
    from kernelopt.bench.results import save_outcome
    from kernelopt.bench.suite import discover_suite
    from kernelopt.cli import main
    from tests.support.bench_outcomes import outcome

    problems = Path(__file__).resolve().parents[3] / "problems"
    unseen = problems / "unseen"
    results = tmp_path / "h200-unseen"
    first = discover_suite(unseen)[0]
    save_outcome(results, first, outcome(first.name, "fallback", 1.0, f=0.0))
    assert (results / f"{first.name}.json").is_file()  # flat: no level folder
    rc = main(["bench", str(unseen), "--results", str(results), "--report-only"])
    assert rc == 0
    report = (results / "report.md").read_text()
    assert "- **problems finished**: 1 of 10 (PARTIAL: the rest have not run yet)" in report
    assert [r.name for r in load_results(results)] == [first.name]
    assert len(discover_suite(problems)) == len(list(problems.glob("level*/*.py")))
