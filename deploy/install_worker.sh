#!/bin/sh
# The last build step of both worker images (deploy/Dockerfile, stages cpu and gpu), run
# in /opt/kernelopt: kernelopt into the venv that already holds the pinned torch (naming
# the pin again keeps pip from moving it), and the unprivileged user the images run as,
# owner of KERNELOPT_HOME.
set -eu
pip install "torch==${TORCH_VERSION}" .
useradd --create-home --uid 10001 --user-group kernelopt
mkdir -p /var/lib/kernelopt
chown kernelopt:kernelopt /var/lib/kernelopt
