# Source on the GPU host after scripts/device_env.sh, with ".device" carried:
#   source scripts/device_env.sh; source scripts/device_bwrap.sh
# The host has no network: bubblewrap travels as the Debian .deb that
#   (cd .device && apt-get download bubblewrap)
# fetched on a networked machine (needs libc6 >= 2.34, libcap2, libselinux1 on the host).
# It is unpacked (no install, no root needed) and KERNELOPT_BWRAP points gates/sandbox.py at it.
if ! command -v bwrap >/dev/null 2>&1; then
    deb=$(ls .device/bubblewrap_*.deb 2>/dev/null | head -1)
    if [ -z "$deb" ]; then
        echo "no bwrap on this host and no .device/bubblewrap_*.deb carried" >&2
    else
        mkdir -p /tmp/bwrap-pkg && dpkg -x "$deb" /tmp/bwrap-pkg
        export KERNELOPT_BWRAP=/tmp/bwrap-pkg/usr/bin/bwrap
    fi
fi
