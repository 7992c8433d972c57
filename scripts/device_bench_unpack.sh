#!/usr/bin/env bash
# Here, after a device chunk (scripts/device_bench_chunk.sh): take its results into the
# repo and rewrite the partial report.
#   bash scripts/device_bench_unpack.sh PATH/results.tgz [RESULTS] [SUITE]
# SUITE (default problems) is what the report counts against: give the same SUITE and
# RESULTS as the chunk did (the unseen set: problems/unseen docs/results/h200-unseen).
# The device's results folder is a superset of ours (it started from ours), runs.jsonl
# included; the cost table lands in /tmp/bench-costs/ for reading, not committing.
set -euo pipefail
cd "$(dirname "$0")/.."
bundle=${1:?usage: device_bench_unpack.sh PATH/results.tgz [RESULTS] [SUITE]}
results=${2:-docs/results/h200}
suite=${3:-problems}
scratch=$(mktemp -d)
tar xzf "$bundle" -C "$scratch"
mkdir -p "$results"
# runs.jsonl: keep our lines and add the device's new ones (a chunk's copy starts from the
# tree it was given, so unpacking only a later chunk would drop an earlier chunk's line)
runs=$(mktemp)
cat "$results/runs.jsonl" "$scratch/$results/runs.jsonl" 2>/dev/null | awk '!seen[$0]++' > "$runs"
cp -r "$scratch/$results/." "$results/"
cp "$runs" "$results/runs.jsonl" && rm -f "$runs"
rm -rf /tmp/bench-costs && mkdir -p /tmp/bench-costs
cp -r "$scratch/tmp/." /tmp/bench-costs/ 2>/dev/null || true
rm -rf "$scratch"
"${PYTHON:-python3}" -m kernelopt.cli bench "$suite" --results "$results" --report-only --proposer builtin
echo "now: git add $results && git commit"
