"""Where a suite run's GPU time went: every finished problem's activities, with stages.

    source scripts/device_env.sh; python3 scripts/bench_costs.py RESULTS_DIR OUT_DIR

Run on the machine whose server ran ``kernelopt bench`` (same ``KERNELOPT_HOME`` and
ports).  Reads each outcome's campaign id from ``RESULTS_DIR`` and writes the same
histories and ``activity_durations.txt`` table as ``gpu_e2e.py`` into ``OUT_DIR``:
each GPU activity's run time and, where it reports them (``compile``, ``triage``,
``gate_candidate``, ``gate_model``), its ``stage_seconds``.
Histories are large; keep them off $OUT unless asked for (``--histories``).
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from temporalio.client import Client  # noqa: E402
from temporalio.service import RPCError  # noqa: E402

from kernelopt.bench.results import load_results  # noqa: E402
from kernelopt.client import connect  # noqa: E402
from kernelopt.config import Settings  # noqa: E402
from scripts.gpu_e2e import dump_histories  # noqa: E402


async def export_costs(client: Client, results: Path, out: Path, histories: bool = False) -> int:
    """Write the activity table of every finished problem this server still knows."""
    ids = [r.outcome.campaign_id for r in load_results(results)]
    scratch = out / "histories"
    scratch.mkdir(parents=True, exist_ok=True)
    found = []
    for campaign_id in ids:
        try:
            await client.get_workflow_handle(campaign_id).describe()
        except RPCError:  # finished under an earlier server: its history is gone
            continue
        found.append(campaign_id)
    await dump_histories(client, found, scratch)
    shutil.move(scratch / "activity_durations.txt", out / "activity_durations.txt")
    if not histories:
        shutil.rmtree(scratch)
    return len(found)


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("--histories", action="store_true", help="keep the history JSON files")
    args = parser.parse_args()
    client = await connect(Settings.from_env(), start_embedded=False)
    found = await export_costs(client, args.results, args.out, args.histories)
    print(f"{found} campaign(s) on this server: {args.out / 'activity_durations.txt'}")
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
