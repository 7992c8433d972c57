"""Compile, segmentation, triage, memory and payload sizes of problems/large/ on the GPU (issue 31).

    source scripts/device_env.sh
    python3 -m scripts.gpu_large_models --out "$OUT"
    # -> $OUT/large_models.md (the table), large_models.json (every number)
    python3 -m scripts.gpu_large_models --out "$OUT" --model 001_resnet50  # one model:
    # -> $OUT/large_models.001_resnet50.{md,json}

Each model runs in its own child process (so peak host memory is its own): the
compile step, segmentation and triage as a campaign's activities run them
(``compile_problem``, ``segment``, ``triage``), timed; then the kernel, launch,
library-call and target counts, f, the ceilings, triage's cut-off and the
targets it searches first, peak host RSS and peak GPU memory, and the size of
every payload a campaign sends for this model as Temporal's pydantic converter
encodes it: the compile, segment and triage results, the campaign state carried
across continue-as-new, and one search's input and one gate call's input with
the whole segmentation and with the target's scoped part (what a search sends
now).  A history grows by about one gate input per candidate.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULT = "LARGE_MODEL_RESULT "  # the child's answer among compiler and log output
MODELS = sorted((ROOT / "problems" / "large").glob("[0-9][0-9][0-9]_*.py"))


def _size(value: object) -> int:
    from temporalio.contrib.pydantic import pydantic_data_converter

    return pydantic_data_converter.payload_converter.to_payloads([value])[0].ByteSize()


def measure(path: Path, home: Path) -> dict[str, Any]:
    """One model, in this process: every number of the table."""
    import torch

    from kernelopt.compile.segment import segment
    from kernelopt.compile.segment_scope import scope_segment
    from kernelopt.compile.triage import triage
    from kernelopt.contracts import CampaignState
    from kernelopt.contracts.compiled import CompileInput, SegmentInput, TriageInput
    from kernelopt.contracts.problem import ProblemSpec
    from kernelopt.contracts.search import SearchKernelInput
    from kernelopt.contracts.verdicts import CandidateGateInput
    from kernelopt.kinds.registry import compile_problem
    from kernelopt.store import open_store

    store = open_store(home / "artifacts")
    source = store.put_text(path.read_text(), media_type="text/x-python", name=path.name)
    spec = ProblemSpec(name=f"large_{path.stem}", source=source, path=str(path))
    start = time.perf_counter()
    compiled = compile_problem(CompileInput(problem=spec), store)
    compile_s = time.perf_counter() - start
    start = time.perf_counter()
    seg = segment(SegmentInput(compiled=compiled), store)
    segment_s = time.perf_counter() - start
    start = time.perf_counter()
    tri = triage(TriageInput(compiled=compiled, segment=seg), store)
    triage_s = time.perf_counter() - start
    state = CampaignState(compiled=compiled, segment=seg, triage=tri, targets=tri.targets)
    payloads = {"compile result": compiled, "segment result": seg, "triage result": tri}
    payloads["campaign state"] = state
    if tri.targets:  # the first target searched: its search's and one gate call's inputs
        first = tri.targets[0]
        queues = {"gpu_queue": "gpu", "cpu_queue": "cpu"}
        gate = {"candidate_id": "c", "source": first.source or source}
        for label, part in (("whole segment", seg), ("scoped", scope_segment(seg, first))):
            payloads[f"search input, {label}"] = SearchKernelInput(
                campaign_id="c", compiled=compiled, segment=part, target=first, **queues
            )
            payloads[f"gate input, {label}"] = CandidateGateInput(
                compiled=compiled, segment=part, target=first, **gate
            )
    return {
        "model": path.stem,
        "compile_s": round(compile_s, 1),
        "compile_stage_s": compiled.stage_seconds,
        "segment_s": round(segment_s, 2),
        "triage_s": round(triage_s, 1),
        "mode": seg.mode.value,
        "kernels": len(seg.kernels),
        "launches": sum(len(k.launches) for k in seg.kernels),
        "library_calls": len(seg.library_calls),
        "fusion_groups": len(seg.fusion_groups),
        "targets": len(seg.targets),
        "eager_ms": compiled.eager_ms,
        "compiled_ms": compiled.compiled_ms,
        "f": round(tri.library_fraction, 4),
        "ceilings": tri.ceilings,
        "verdict": tri.verdict,
        "required_speedup": tri.required_speedup,
        "searched": len(tri.targets),
        "deferred": len(tri.deferred_targets),
        "deferred_share": round(tri.deferred_share, 4),
        "cutoff": tri.cutoff,
        "top_targets": [(t.id, round(t.share, 4)) for t in tri.targets[:10]],
        "peak_gpu_gib": round(torch.cuda.max_memory_allocated() / 2**30, 2),
        "peak_host_gib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20, 2),
        "payload_kib": {name: round(_size(v) / 1024, 1) for name, v in payloads.items()},
    }


def table(rows: list[dict[str, Any]]) -> str:
    cols = [
        ("model", "model"),
        ("compile s", "compile_s"),
        ("segment s", "segment_s"),
        ("triage s", "triage_s"),
        ("kernels / launches", None),
        ("library calls", "library_calls"),
        ("targets (searched / deferred)", None),
        ("f", "f"),
        ("ceiling S=2 / inf", None),
        ("peak GPU / host GiB", None),
    ]
    lines = ["| " + " | ".join(c for c, _ in cols) + " |", "|" + "---|" * len(cols)]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['model']} | error: {r['error'][:200]} |")
            continue
        cells = []
        for title, key in cols:
            if key is not None:
                cells.append(str(r[key]))
            elif title.startswith("kernels"):
                cells.append(f"{r['kernels']} / {r['launches']}")
            elif title.startswith("targets"):
                cells.append(f"{r['targets']} ({r['searched']} / {r['deferred']})")
            elif title.startswith("ceiling"):
                cells.append(f"{r['ceilings']['2']:.3f}x / {r['ceilings']['inf']:.3f}x")
            else:
                cells.append(f"{r['peak_gpu_gib']} / {r['peak_host_gib']}")
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", "Payloads (KiB, as Temporal encodes them):", ""]
    names = max((list(r["payload_kib"]) for r in rows if "payload_kib" in r), key=len, default=[])
    lines += ["| model | " + " | ".join(names) + " |", "|" + "---|" * (len(names) + 1)]
    lines += [
        f"| {r['model']} | " + " | ".join(str(r["payload_kib"].get(n, "-")) for n in names) + " |"
        for r in rows
        if "payload_kib" in r
    ]
    lines += ["", "Triage's cut-off and first targets:", ""]
    for r in rows:
        if "cutoff" in r:
            top = ", ".join(f"{t} ({s:.1%})" for t, s in r["top_targets"][:5])
            lines.append(f"* {r['model']}: {r['cutoff']}. First: {top}.")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=Path("."))
    parser.add_argument("--one", type=Path, help=argparse.SUPPRESS)  # the child's model
    parser.add_argument("--timeout", type=float, default=1800.0, help="seconds per model")
    parser.add_argument(
        "--model", action="append", default=[], help="only this model (file stem); repeatable"
    )
    args = parser.parse_args()
    if args.one is not None:
        with tempfile.TemporaryDirectory() as home:
            print(RESULT + json.dumps(measure(args.one, Path(home))))
        return
    rows = []
    chosen = [p for p in MODELS if not args.model or p.stem in args.model]
    suffix = "" if not args.model else "." + "+".join(p.stem for p in chosen)
    for path in chosen:
        proc = subprocess.run(
            [sys.executable, __file__, "--one", str(path)],
            capture_output=True,
            text=True,
            timeout=args.timeout,
            cwd=ROOT,
        )
        found = [line for line in proc.stdout.splitlines() if line.startswith(RESULT)]
        if proc.returncode == 0 and found:
            rows.append(json.loads(found[-1].removeprefix(RESULT)))
        else:
            rows.append({"model": path.stem, "error": proc.stderr[-2000:]})
        print(json.dumps(rows[-1])[:400], flush=True)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"large_models{suffix}.json").write_text(json.dumps(rows, indent=2) + "\n")
    (args.out / f"large_models{suffix}.md").write_text(table(rows))


if __name__ == "__main__":
    main()
