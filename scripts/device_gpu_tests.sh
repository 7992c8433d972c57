#!/usr/bin/env bash
# GPU tests (`-m gpu`) on the GPU host, split over its GPUs, for a regression check of
# main:   bash scripts/device_gpu_tests.sh SECONDS      (carry [".device"])
# Batch 0 (GPU_TESTS_0, pytest arguments; default: the compile/re-stitch tests) and
# batch 1 (GPU_TESTS_1; default: the gate tests; `none`: no batch) run side by side on
# two GPUs, one after the other on one, each with its own KERNELOPT_HOME and compiler
# caches (kept in /tmp/gpu-tests-N, so a next call on the still-warm machine reuses them).  A batch gets
# SIGINT after SECONDS (GPU_SECONDS_0 / GPU_SECONDS_1: per batch, for two batches in
# one call on one GPU), so pytest still prints which tests passed (SIGTERM would lose
# that).  Full logs: $OUT/gpu-tests-N.log; failures and counts on stdout.
#
# Progress survives a cut call: pytest runs with -v (each test's id is written to the log
# when it starts, its outcome when it ends), and every PASSED / FAILED / ERROR / SKIPPED
# line is echoed to stdout as the test ends ("[batch N] ..."), so the device tool's
# output_tail shows how far a batch got.  -ra and --durations=0 end the log with every
# non-passing outcome and each test's time.
#   * Deadlines: a batch tells the tests that read one when to stop starting expensive
#     work (KERNELOPT_GPU_DEADLINE: tests/kernelopt/compile/test_gpu.py skips what is
#     left; KERNELOPT_GATES_DEADLINE: tests/gates/test_gpu_campaign.py), 75 s before
#     its SIGINT, so a batch ends with skips rather than a cut.
#   * What the gate tests write (KERNELOPT_GATES_OUT: the adversarial suite's rows, table and
#     results, the screening and campaign tables) comes back as $OUT/gates-out-N.tgz, so a
#     failed case still says which gate decided and why.
#     The whole suite alone needs ~600 s on one H200 (baseline warm-ups and gate 4 one at a
#     time): run the cheats and the honest cases (KERNELOPT_GATES_CASES) as two calls.
#   * Per-test limit: GPU_TEST_TIMEOUT seconds (default 450) through pytest-timeout
#     (signal method: the hung test fails, the batch goes on) when the carried wheels
#     have it (scripts/device_wheels.sh fetches it); without it only the batch limit holds.
set -uo pipefail
seconds=${1:?usage: device_gpu_tests.sh SECONDS}
source scripts/device_env.sh
source scripts/device_bwrap.sh  # the gates refuse to run candidates without the sandbox
nvidia-smi -L
gpus=$(nvidia-smi -L | grep -c '^GPU')
batch_0=${GPU_TESTS_0:-tests/kernelopt/compile/test_gpu.py}
batch_1=${GPU_TESTS_1:-tests/gates tests/activities/test_spare_child.py}
per_test=()
if python3 -c 'import pytest_timeout' 2>/dev/null; then
    per_test=(--timeout "${GPU_TEST_TIMEOUT:-450}" --timeout-method signal)
else
    echo "pytest-timeout is not installed: no per-test limit (re-run scripts/device_wheels.sh)"
fi

run_batch() {  # N GPU ARGS
    local n=$1 gpu=$2 args=$3 dir=/tmp/gpu-tests-$1 deadline limit_var=GPU_SECONDS_$1 limit
    limit=${!limit_var:-$seconds}
    if [ "$args" = none ]; then
        echo "batch $n: none" >> "$OUT/gpu-tests-exit.txt"
        : > "$OUT/gpu-tests-$n.log"
        return
    fi
    mkdir -p "$dir/out"
    deadline=$(($(date +%s) + limit - 75))
    # ARGS is a pytest command line (files, -k "expression"): let bash parse its quotes
    eval "set -- $args"
    CUDA_VISIBLE_DEVICES=$gpu KERNELOPT_HOME=$dir/home TORCHINDUCTOR_CACHE_DIR=$dir/inductor \
        TRITON_CACHE_DIR=$dir/triton KERNELOPT_GPU_DEADLINE=$deadline \
        KERNELOPT_GATES_DEADLINE=$deadline KERNELOPT_GATES_OUT=$dir/out timeout -s INT -k 30 "$limit" \
        python3 -m pytest -v -ra --durations=0 ${per_test[@]+"${per_test[@]}"} -m gpu -p no:cacheprovider \
        "$@" 2>&1 | tee "$OUT/gpu-tests-$n.log" \
        | grep --line-buffered -E ' (PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS)\b' \
        | sed -u "s/^/[batch $n] /"
    echo "batch $n ($args): exit ${PIPESTATUS[0]} (130 or 124: cut by the time limit)" \
        >> "$OUT/gpu-tests-exit.txt"
    # one file, whatever the tests wrote (the device tool returns at most 8)
    [ -n "$(ls -A "$dir/out")" ] && tar -C "$dir/out" -czf "$OUT/gates-out-$n.tgz" .
}

started=$SECONDS
if [ "$gpus" -ge 2 ]; then
    run_batch 0 0 "$batch_0" &
    run_batch 1 1 "$batch_1" &
    wait
else
    run_batch 0 0 "$batch_0"
    run_batch 1 0 "$batch_1"
fi
echo "all batches in $((SECONDS - started)) s"
cat "$OUT/gpu-tests-exit.txt"
for n in 0 1; do
    echo "=== batch $n"
    grep -E ' (FAILED|ERROR)|^(FAILED|ERROR) ' "$OUT/gpu-tests-$n.log" | cut -c1-300 | tail -n 20
    grep -E '^[0-9.]+s (call|setup|teardown) ' "$OUT/gpu-tests-$n.log" | head -n 15
    grep -E '^=+ .* in [0-9.]+s.* =+$' "$OUT/gpu-tests-$n.log" | tail -n 1
    grep -c ' PASSED' "$OUT/gpu-tests-$n.log" | sed 's/^/passed: /'
done
