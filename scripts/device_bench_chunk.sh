#!/usr/bin/env bash
# One chunk of the suite run on the GPU host (issue 7), for chained device calls:
#   bash scripts/device_bench_chunk.sh SECONDS [SUITE] [RESULTS]
# SUITE defaults to problems (the level suites), RESULTS to docs/results/h200; the unseen
# set runs as its own suite with its own results: SUITE=problems/unseen
# RESULTS=docs/results/h200-unseen (never a folder under docs/results/h200: the level
# report reads every outcome below its folder).
# carry [".device"]. Runs `kernelopt bench` for at most SECONDS (one campaign per
# local GPU worker at a time), then puts the results folder, the bench log and the cost
# table of every campaign this server finished (python -m kernelopt.bench.costs) into
# $OUT/results.tgz. A chunk cut by the time limit leaves the server and workers running:
# the next call within ~30 s re-attaches to the campaigns in flight (deterministic ids),
# finished problems travel with the (tracked) results folder and are skipped.
# Here, afterwards: bash scripts/device_bench_unpack.sh FILES_AT/results.tgz
# The session's last chunk: START_WITHIN=230 with SECONDS=585 (no campaign starts after
# 230 s, so the ones running -- 250-450 s each -- can finish before the lease ends).
# GPU_TESTS="PYTEST ARGS" runs those GPU tests before the bench (see below).
set -uo pipefail
seconds=${1:?usage: device_bench_chunk.sh SECONDS [SUITE] [RESULTS]}
suite=${2:-problems}
results=${3:-docs/results/h200}
source scripts/device_env.sh
export KERNELOPT_HOME=${KERNELOPT_HOME:-/tmp/ko-bench}
export KERNELOPT_SERVER_PORT=${KERNELOPT_SERVER_PORT:-7843} KERNELOPT_UI_PORT=${KERNELOPT_UI_PORT:-8843}
nvidia-smi -L
# GPU tests to run first (a change's device check): GPU_TESTS="FILES" and, optionally,
# GPU_TESTS_K="pytest -k expression". Their time comes on top of SECONDS: shorten SECONDS.
if [ -n "${GPU_TESTS:-}" ]; then
    # the whole log also goes to $OUT: the bench's cost table pushes this tail out of the
    # device call's 12,000-character output
    # shellcheck disable=SC2086
    python3 -m pytest -q -rA -m gpu -p no:cacheprovider $GPU_TESTS ${GPU_TESTS_K:+-k "$GPU_TESTS_K"} \
        > "$OUT/gpu_tests.log" 2>&1
    tail -n 25 "$OUT/gpu_tests.log"
fi
timeout "$seconds" python3 -m kernelopt.cli bench "$suite" --results "$results" \
    ${START_WITHIN:+--start-within "$START_WITHIN"} \
    --proposer builtin --iterations 1 --plans 2 > /tmp/bench.log 2>&1
echo "bench exit $? (124: cut by the time limit)"
# the table itself travels in results.tgz; printed whole, it fills the output tail
python3 -m kernelopt.bench.costs "$results" /tmp/costs | tail -n 1 || echo "no cost table"
# a level suite keeps its outcomes in level*/, a flat one (problems/unseen) beside the report
ls "$results"/level*/*.json "$results"/*.json 2>/dev/null | grep -vc '\.summary\.json$' \
    | sed 's/^/outcomes: /'
tail -n 5 /tmp/costs/activity_durations.txt 2>/dev/null | cut -c1-160
# how the GPU workers launched gate jobs (zygote or spawn), and their logs for reading here
grep -h -o -i -E '(zygote|spawn).{0,60}' "$KERNELOPT_HOME"/workers/*.log 2>/dev/null \
    | sed 's/[0-9]\+/N/g' | sort | uniq -c | sort -rn | head -n 12
mkdir -p /tmp/costs/workers
for f in "$KERNELOPT_HOME"/workers/*.log; do [ -f "$f" ] && tail -n 3000 "$f" > "/tmp/costs/workers/$(basename "$f")"; done
tar czf "$OUT/results.tgz" "$results" /tmp/bench.log /tmp/costs 2>/dev/null
