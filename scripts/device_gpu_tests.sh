#!/usr/bin/env bash
# GPU tests (`-m gpu`) on the GPU host, split over its GPUs, for a regression check of
# main:   bash scripts/device_gpu_tests.sh SECONDS      (carry [".whl", ".device"])
# Batch 0 (GPU_TESTS_0, pytest arguments; default: the compile/re-stitch tests) and
# batch 1 (GPU_TESTS_1; default: the gate tests) run side by side on two GPUs, one after
# the other on one, each with its own KERNELOPT_HOME and compiler caches.  A batch gets
# SIGINT after SECONDS, so pytest still prints which tests passed (SIGTERM would lose
# that).  Full logs: $OUT/gpu-tests-N.log; failures and counts on stdout.
set -uo pipefail
seconds=${1:?usage: device_gpu_tests.sh SECONDS}
source scripts/device_env.sh
nvidia-smi -L
gpus=$(nvidia-smi -L | grep -c '^GPU')
batch_0=${GPU_TESTS_0:-tests/kernelopt/compile/test_gpu.py}
batch_1=${GPU_TESTS_1:-tests/gates tests/activities/test_spare_child.py}

run_batch() {  # N GPU ARGS
    local n=$1 gpu=$2 args=$3 dir=/tmp/gpu-tests-$1
    mkdir -p "$dir"
    # ARGS is a pytest command line (files, -k "expression"): let bash parse its quotes
    eval "set -- $args"
    CUDA_VISIBLE_DEVICES=$gpu KERNELOPT_HOME=$dir/home TORCHINDUCTOR_CACHE_DIR=$dir/inductor \
        TRITON_CACHE_DIR=$dir/triton timeout -s INT -k 30 "$seconds" \
        python3 -m pytest -v -rfE -m gpu -p no:cacheprovider "$@" > "$OUT/gpu-tests-$n.log" 2>&1
    echo "batch $n ($args): exit $? (130 or 124: cut by the time limit)" >> "$OUT/gpu-tests-exit.txt"
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
    grep -E '^=+ .* in [0-9.]+s.* =+$' "$OUT/gpu-tests-$n.log" | tail -n 1
    grep -c ' PASSED' "$OUT/gpu-tests-$n.log" | sed 's/^/passed: /'
done
