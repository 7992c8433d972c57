#!/usr/bin/env bash
# Issue 28 on the H200 in one device call (carry [".whl", ".device"]; .device holds the
# bubblewrap .deb from `(cd .device && apt-get download bubblewrap)`):
#   source scripts/device_env.sh; bash scripts/gpu_sandbox.sh
# Writes the test logs and the cost table under $OUT.
set -uo pipefail
source scripts/device_bwrap.sh
OUT="${OUT:-/tmp/sandbox-out}"
mkdir -p "$OUT"
echo "bwrap: ${KERNELOPT_BWRAP:-$(command -v bwrap)}" | tee "$OUT/sandbox_env.txt"
python3 -m pytest -q -m gpu tests/security/test_sandbox_gpu.py 2>&1 | tail -40 | tee "$OUT/sandbox_gpu_tests.txt"
python3 -m pytest -q tests/security tests/gates/test_sandbox.py 2>&1 | tail -40 | tee "$OUT/sandbox_cpu_tests_on_h200.txt"
python3 scripts/sandbox_cost.py --device cuda --reps 3 --out "$OUT/sandbox_cost_cuda.json" 2>"$OUT/sandbox_cost_cuda.log" | tail -20
