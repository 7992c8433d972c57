#!/usr/bin/env bash
# Here, after a device chunk (scripts/device_bench_chunk.sh): take its results into the
# repo and rewrite the partial report.
#   bash scripts/device_bench_unpack.sh PATH/results.tgz [RESULTS]
# The device's results folder is a superset of ours (it started from ours), runs.jsonl
# included; the cost table lands in /tmp/bench-costs/ for reading, not committing.
set -euo pipefail
cd "$(dirname "$0")/.."
bundle=${1:?usage: device_bench_unpack.sh PATH/results.tgz [RESULTS]}
results=${2:-docs/results/h200}
scratch=$(mktemp -d)
tar xzf "$bundle" -C "$scratch"
mkdir -p "$results"
cp -r "$scratch/$results/." "$results/"
rm -rf /tmp/bench-costs && mkdir -p /tmp/bench-costs
cp -r "$scratch/tmp/." /tmp/bench-costs/ 2>/dev/null || true
rm -rf "$scratch"
"${PYTHON:-python3}" -m kernelopt.cli bench problems --results "$results" --report-only --proposer builtin
echo "now: git add $results && git commit"
