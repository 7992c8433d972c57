#!/usr/bin/env bash
# A device call's usual sections, one after another on the GPU host (carry [".device"]):
#   bash scripts/device_calls.sh SECTION...
# Sections (each reads its own variables; results go to $OUT, a tarball where a tool
# writes many files, since the device tool returns at most 8):
#   gpu    GPU tests through scripts/device_gpu_tests.sh: G0 and G1 are its two batches'
#          pytest arguments (G1 unset: none), G_S the seconds for each
#   e2e    scripts.gpu_e2e on the problem paths in E2E with a deadline of E2E_S seconds;
#          RESUME=1 continues the campaigns of the previous call on the still-warm machine.
#          Its files come back as $OUT/e2e.tgz, its table on stdout
#   ident  the identity corpus's verify on the problems named in IDENT (comma-separated),
#          else on the first OWED problems no committed row accepted (OWED_ON=h200: no
#          row from an H200; OWED_ON=auto: none from the card this call got), a deadline
#          of V_S seconds; rows in $OUT/identity.jsonl
# Example:  E2E="problems/level1/023_diag_matmul.py" E2E_S=400 bash scripts/device_calls.sh e2e
set -uo pipefail
source scripts/device_env.sh
source scripts/device_bwrap.sh  # the gates refuse to run candidates without the sandbox
nvidia-smi -L | tee "$OUT/device.txt"
work=/tmp/device-calls
mkdir -p "$work"
for section in "$@"; do
    echo "=== $section $(date +%T)"
    case $section in
        gpu)
            GPU_TESTS_0="${G0:?G0: pytest arguments of the first batch}" GPU_TESTS_1="${G1:-none}" \
                bash scripts/device_gpu_tests.sh "${G_S:-300}"
            ;;
        e2e)
            mkdir -p "$work/e2e"
            # shellcheck disable=SC2086  # E2E holds several paths
            OUT="$work/e2e" timeout -s INT "$((${E2E_S:-400} + 60))" python3 -m scripts.gpu_e2e \
                --deadline "${E2E_S:-400}" ${RESUME:+--resume} ${E2E:?E2E: problem paths} 2>&1 \
                | tail -n 60
            tar -C "$work/e2e" -czf "$OUT/e2e.tgz" .
            ;;
        ident)
            mkdir -p "$work/ident"
            if [ -n "${IDENT:-}" ]; then
                pick=(--only "$IDENT")
            else
                owed_on=${OWED_ON:-}
                if [ "$owed_on" = auto ]; then
                    owed_on=$(nvidia-smi -L | grep -oiE 'h[0-9]{3}' | head -n 1 | tr 'A-Z' 'a-z')
                fi
                pick=(--owed "${OWED:-15}" --owed-on "$owed_on")
            fi
            OUT="$work/ident" python3 -m scripts.gpu_identity_corpus verify \
                --deadline "${V_S:-400}" "${pick[@]}" 2>&1 | tail -n 40
            cp "$work/ident/identity.jsonl" "$OUT/identity.jsonl"
            ;;
        *)
            echo "unknown section: $section (gpu, e2e, ident)"
            exit 2
            ;;
    esac
done
echo "=== end $(date +%T)"
