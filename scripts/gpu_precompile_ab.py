"""Why max-autotune's GEMM autotunes turn slow on the GPU host, as an A/B (issue 31).

    source scripts/device_env.sh
    python3 -m scripts.gpu_precompile_ab --out "$OUT"
    # -> $OUT/precompile_ab.md (the table), precompile_ab.jsonl, one log per run

On the H200, a large model's first two GEMM autotunes took about 1 s for 16-17 choices
and every later one 10-40 s, each with "0.0003 seconds precompiling"
(docs/results/large_campaign).  Inductor precompiles a template's choices in one of two
ways: in threads of this process while its compile-worker pool is still starting, or in
that pool once it is ready.  This probe compiles the same chain of distinct GEMMs under
the product's max-autotune options in fresh processes with empty compiler caches, once
with the pool warmed before the compile (``pool``) and once with Inductor's
``compile_threads`` at 1 in the process (``threads``: no pool, so the thread path), and
prints the compile's wall time and every autotune's benchmarking and precompiling seconds.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULT = "PRECOMPILE_AB_RESULT "
LINE = re.compile(
    r"AUTOTUNE benchmarking takes ([\d.]+) seconds and ([\d.]+) seconds precompiling"
    r" for (\d+) choices"
)
# (in, out) features of a chain of linear layers: every GEMM shape distinct
WIDTHS = (1024, 3072, 1024, 768, 2304, 768, 4096, 512)


def child(variant: str, rows: int) -> None:
    """One compile in this process; its answer is the last stdout line."""
    import torch
    from torch._inductor import config
    from torch._inductor.async_compile import AsyncCompile

    from kernelopt.compile.modes import mode_options

    waited = 0.0
    if variant == "threads":
        config.compile_threads = 1
    else:
        started = time.perf_counter()
        AsyncCompile.warm_pool()
        while not AsyncCompile.use_process_pool() and time.perf_counter() - started < 120:
            time.sleep(0.2)
        waited = time.perf_counter() - started
    layers = [torch.nn.Linear(a, b) for a, b in itertools.pairwise(WIDTHS)]
    model = torch.nn.Sequential(*layers).cuda()
    x = torch.randn(rows, WIDTHS[0], device="cuda")
    options = mode_options("max-autotune")
    options.pop("compile_threads", None)  # the product's rule; the variant decides here
    compiled = torch.compile(model, options=options)
    started = time.perf_counter()
    with torch.no_grad():
        compiled(x)
    torch.cuda.synchronize()
    answer = {
        "variant": variant,
        "compile_s": round(time.perf_counter() - started, 2),
        "pool_wait_s": round(waited, 2),
        "pool_in_use": AsyncCompile.use_process_pool(),
        "compile_threads": config.compile_threads,
    }
    sys.stdout.write(RESULT + json.dumps(answer) + "\n")
    sys.stdout.flush()


def run(variant: str, rows: int, out: Path, timeout: float) -> dict[str, Any]:
    """The variant in a fresh process with empty caches; its autotune lines parsed."""
    caches = Path(tempfile.mkdtemp(prefix=f"ab-{variant}-"))
    env = dict(os.environ)
    env.pop("TORCHINDUCTOR_COMPILE_THREADS", None)
    env |= {
        "TORCHINDUCTOR_CACHE_DIR": str(caches / "inductor"),
        "TRITON_CACHE_DIR": str(caches / "triton"),
        "PYTHONPATH": str(ROOT),
    }
    log = out / f"precompile_ab.{variant}.log"
    cmd = [sys.executable, "-m", "scripts.gpu_precompile_ab", "--child", variant]
    cmd += ["--rows", str(rows)]
    started = time.perf_counter()
    try:
        proc = subprocess.run(
            cmd, env=env, cwd=ROOT, capture_output=True, text=True, timeout=timeout
        )
        text, code = proc.stdout + proc.stderr, proc.returncode
    except subprocess.TimeoutExpired as exc:
        text = (exc.stdout or b"").decode() + (exc.stderr or b"").decode()
        code = None
    log.write_text(text)
    row: dict[str, Any] = {"variant": variant, "returncode": code}
    for line in text.splitlines():
        if line.startswith(RESULT):
            row |= json.loads(line[len(RESULT) :])
    tunes = [tuple(float(g) for g in m.groups()) for m in LINE.finditer(text)]
    row["process_s"] = round(time.perf_counter() - started, 2)
    row["autotunes"] = [{"bench_s": b, "precompile_s": p, "choices": int(c)} for b, p, c in tunes]
    row["bench_total_s"] = round(sum(b for b, _, _ in tunes), 2)
    return row


def table(rows: list[dict[str, Any]]) -> str:
    head = "| variant | compile s | autotunes | benchmarking s (sum) | each: bench / precompile s |"
    lines = [head, "| --- | --- | --- | --- | --- |"]
    for r in rows:
        tunes = r.get("autotunes") or []
        each = ", ".join(f"{t['bench_s']:.2f}/{t['precompile_s']:.4f}" for t in tunes)
        lines.append(
            f"| {r['variant']} | {r.get('compile_s', 'cut')} | {len(tunes)} "
            f"| {r.get('bench_total_s')} | {each} |"
        )
    return "\n".join(lines) + "\n"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, default=Path("."))
    p.add_argument("--rows", type=int, default=8192)
    p.add_argument("--timeout", type=float, default=240.0)
    p.add_argument("--variants", default="threads,pool")
    p.add_argument("--child", default="")
    args = p.parse_args()
    if args.child:
        child(args.child, args.rows)
        return 0
    args.out.mkdir(parents=True, exist_ok=True)
    rows = []
    for variant in args.variants.split(","):
        rows.append(run(variant, args.rows, args.out, args.timeout))
        with (args.out / "precompile_ab.jsonl").open("a") as f:
            f.write(json.dumps(rows[-1]) + "\n")
        (args.out / "precompile_ab.md").write_text(table(rows))
        sys.stdout.write(table(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
