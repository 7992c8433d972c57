#!/usr/bin/env bash
# Issue 28 on the H200 in one device call, <= 200 s on a 16-core host (carry [".device"];
# .device holds the bubblewrap .deb from `(cd .device && apt-get download bubblewrap)`):
#   source scripts/device_env.sh; bash scripts/gpu_sandbox.sh
# Each step has its own `timeout` and streams its output to a file under $OUT as it runs
# (a killed step still leaves what it printed); steps run even if an earlier one failed.
# $OUT/steps.txt gets one line per step: name, exit status (124 = its timeout hit), seconds.
set -uo pipefail
source scripts/device_bwrap.sh
OUT="${OUT:-/tmp/sandbox-out}"
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
export TRITON_CACHE_DIR=/tmp/tc-gpu-sandbox TORCHINDUCTOR_CACHE_DIR=/tmp/ic-gpu-sandbox
: >"$OUT/steps.txt"

step() {  # step NAME SECONDS CMD...: run CMD under `timeout`, output to $OUT/NAME.txt
    local name=$1 limit=$2 started=$SECONDS rc
    shift 2
    echo "== $name (limit ${limit}s): $*" | tee -a "$OUT/steps.txt"
    timeout -k 5 "$limit" "$@" >"$OUT/$name.txt" 2>&1
    rc=$?
    echo "   $name rc=$rc $((SECONDS - started))s" | tee -a "$OUT/steps.txt"
    tail -5 "$OUT/$name.txt"
}

{
    echo "bwrap: ${KERNELOPT_BWRAP:-$(command -v bwrap)}"
    echo "uid: $(id -u)  kernel: $(uname -r)  cores: $(nproc)  setpriv: $(command -v setpriv)"
    timeout 20 python3 -c "from gates import sandbox as s; print('root drop:', s._root_mode(s.require()))"
} >"$OUT/sandbox_env.txt" 2>&1
cat "$OUT/sandbox_env.txt"

# Budget on the H200 (16 cores, root): a spawned CPU gate child costs ~7.5 s there (fresh
# interpreter + torch), a forked one ~1 s.  So the CPU suite runs every forked case, the
# non-hostile tests and the two spawned cases that root changes (fork bomb, disk filler);
# the GPU tests run once, in the first step.
PYTEST=(python3 -m pytest -v -p no:cacheprovider --durations=10)
step sandbox_gpu_tests 50 "${PYTEST[@]}" -m gpu tests/security/test_sandbox_gpu.py
step sandbox_cpu_tests_on_h200 85 "${PYTEST[@]}" -m "not gpu" \
    -k "not spawned or fork_bomb or disk_filler" \
    tests/security tests/gates/test_sandbox.py tests/kernelopt/profiling/test_ncu_sandbox.py
step sandbox_cost_cuda 55 python3 -m scripts.sandbox_cost --device cuda --reps 3 \
    --spawned-reps 1 --out "$OUT/sandbox_cost_cuda.json"
echo "total ${SECONDS}s" | tee -a "$OUT/steps.txt"
