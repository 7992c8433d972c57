#!/usr/bin/env bash
# Build the cpu worker image and run it for real (issue 8): the container is the only CPU
# worker of a campaign against a Temporal dev server, then `docker stop` must end it
# gracefully (tests/deploy/test_container_worker.py).  Needs a Docker engine.
#
#   bash scripts/docker_smoke.sh                 # base image from Docker Hub
#   OFFLINE_BASE=1 bash scripts/docker_smoke.sh  # no registry: a Debian base by debootstrap
#   PYTHON_BASE=IMAGE bash scripts/docker_smoke.sh  # a base you have (see deploy/Dockerfile)
#
# OFFLINE_BASE=1 builds local/python:3.11-bookworm from a Debian mirror (root, debootstrap;
# MIRROR overrides deb.debian.org) for the cpu stage.  EXTRA_CA=FILE adds a
# CA certificate to that base, for a TLS-intercepting proxy between the build and PyPI.
# TORCH_VERSION, TORCH_INDEX_URL (a CPU wheel keeps the image small), PIP_INDEX_URL and
# PIP_TRUSTED_HOST (a plain-http index needs it) pass through to the build.
set -euo pipefail
cd "$(dirname "$0")/.."
image=${KERNELOPT_TEST_IMAGE:-kernelopt-worker:cpu}
build_args=()
if [ "${OFFLINE_BASE:-0}" = 1 ]; then
    base=local/python:3.11-bookworm
    work=$(mktemp -d)
    trap 'rm -rf "$work"' EXIT
    debootstrap --variant=minbase bookworm "$work/rootfs" "${MIRROR:-http://deb.debian.org/debian}" >/dev/null
    tar -C "$work/rootfs" -c . | docker import - local/debian-bookworm:minbase >/dev/null
    mkdir -p "$work/ctx"
    if [ -n "${EXTRA_CA:-}" ]; then cp "$EXTRA_CA" "$work/ctx/extra-ca.crt"; else : > "$work/ctx/extra-ca.crt"; fi
    cat > "$work/ctx/Dockerfile" <<'EOF'
FROM local/debian-bookworm:minbase
COPY extra-ca.crt /usr/local/share/ca-certificates/extra-ca.crt
RUN apt-get update \
 && apt-get install -y --no-install-recommends python3 python3-venv python-is-python3 ca-certificates \
 && update-ca-certificates && rm -rf /var/lib/apt/lists/*
ENV PIP_CERT=/etc/ssl/certs/ca-certificates.crt SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt
EOF
    docker build -q -t "$base" "$work/ctx" >/dev/null
    build_args+=(--build-arg "PYTHON_BASE=$base")
    echo "base: $base (debootstrap)"
elif [ -n "${PYTHON_BASE:-}" ]; then
    build_args+=(--build-arg "PYTHON_BASE=$PYTHON_BASE")
fi
for name in TORCH_VERSION TORCH_INDEX_URL PIP_INDEX_URL PIP_TRUSTED_HOST; do
    if [ -n "${!name:-}" ]; then build_args+=(--build-arg "$name=${!name}"); fi
done
started=$SECONDS
docker build -f deploy/Dockerfile --target cpu -t "$image" "${build_args[@]}" . >/tmp/docker_smoke_build.log 2>&1 \
    || { tail -n 30 /tmp/docker_smoke_build.log; exit 1; }
echo "built $image in $((SECONDS - started)) s ($(docker image inspect -f '{{.Size}}' "$image" | awk '{printf "%.2f GB", $1/1e9}'))"
KERNELOPT_TEST_IMAGE=$image python3 -m pytest -q -p no:cacheprovider tests/deploy/test_container_worker.py
