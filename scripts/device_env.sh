# Source at the start of every device (GPU host) command:
#   source scripts/device_env.sh
# Installs the carried wheels (.device/site.tar.xz, else .whl; scripts/device_wheels.sh) into
# /tmp/site and puts the project on PYTHONPATH; the host's own torch/triton stay in charge.
if [ -f .device/site.tar.xz ]; then  # the wheels unpacked (scripts/device_wheels.sh)
    mkdir -p /tmp/site && xz -dc .device/site.tar.xz | tar -C /tmp/site -xf - \
        || { echo "site unpack failed"; exit 3; }
else
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target /tmp/site .whl/*.whl >/dev/null 2>&1 || { echo "wheel install failed"; exit 3; }
fi
if [ -d .whl-helion ]; then  # carried only for Helion problems
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target /tmp/site .whl-helion/*.whl >/dev/null 2>&1 || echo "helion wheel install failed"
fi
export PYTHONPATH="/tmp/site:$PWD${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONUNBUFFERED=1
export KERNELOPT_HOME="${KERNELOPT_HOME:-/tmp/kernelopt-home}"
if [ -f .device/temporal.xz ] && [ ! -x /tmp/bin/temporal ]; then
    mkdir -p /tmp/bin && xz -dc .device/temporal.xz > /tmp/bin/temporal && chmod +x /tmp/bin/temporal
fi
export PATH="/tmp/bin:$PATH"
