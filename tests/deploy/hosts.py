"""Separate "hosts" for worker processes: Linux network namespaces on a bridge.

Each worker gets its own network namespace (its own loopback, interfaces and
routes) joined to a private bridge in the test's namespace; the Temporal dev
server listens on the bridge address only.  A worker therefore reaches the
server exactly as a worker on another machine would: over a network link, at
``KERNELOPT_TEMPORAL_ADDRESS``, never via 127.0.0.1.  The filesystem is shared,
as the artifact store is in production (a shared volume).

Creating namespaces needs root (CAP_NET_ADMIN) and iproute2; where that is not
available the hosts degrade to plain processes on 127.0.0.1 and ``mode`` says so.
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import random
import shutil
import subprocess
import sys
import uuid
from dataclasses import dataclass, field


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, text=True, timeout=20)


def _used_networks() -> list[ipaddress.IPv4Network]:
    out = subprocess.run(
        ["ip", "-4", "-o", "addr", "show"], capture_output=True, text=True, timeout=20
    ).stdout
    nets = []
    for line in out.splitlines():
        parts = line.split()
        if "inet" in parts:
            nets.append(ipaddress.ip_interface(parts[parts.index("inet") + 1]).network)
    return nets


@dataclass
class Hosts:
    count: int
    tag: str = field(default_factory=lambda: uuid.uuid4().hex[:6])
    mode: str = "processes"
    server_ip: str = "127.0.0.1"
    namespaces: list[str] = field(default_factory=list)
    reason: str = ""
    _bridge: str | None = None

    def namespace(self, index: int) -> str | None:
        return self.namespaces[index] if self.namespaces else None

    def __enter__(self) -> Hosts:
        if os.environ.get("KERNELOPT_TEST_NO_NETNS"):
            self.reason = "KERNELOPT_TEST_NO_NETNS is set"
            return self
        if os.geteuid() != 0 or shutil.which("ip") is None:
            self.reason = "needs root and iproute2"
            return self
        try:
            self._create()
        except (subprocess.SubprocessError, OSError) as exc:
            detail = getattr(exc, "stderr", "") or str(exc)
            self.reason = f"network namespaces unavailable: {detail.strip()[:200]}"
            self._destroy()
            self.server_ip = "127.0.0.1"
            return self
        self.mode = "netns"
        return self

    def __exit__(self, *exc: object) -> None:
        self._destroy()

    def reaches(self, index: int, ip: str, port: int) -> bool:
        """Can a process in namespace ``index`` open a TCP connection to ip:port?"""
        probe = f"import socket; socket.create_connection(({ip!r}, {port}), timeout=5).close()"
        ns = self.namespace(index)
        cmd = ["ip", "netns", "exec", ns, sys.executable, "-c", probe] if ns else None
        if cmd is None:
            return True
        return subprocess.run(cmd, capture_output=True, timeout=30).returncode == 0

    def degrade(self, reason: str) -> None:
        """Fall back to plain processes on loopback (e.g. a firewall drops the bridge)."""
        self._destroy()
        self.namespaces, self.server_ip = [], "127.0.0.1"
        self.mode, self.reason = "processes", reason

    def _create(self) -> None:
        used = _used_networks()
        for _ in range(50):
            net = ipaddress.ip_network(
                f"10.{random.randint(200, 250)}.{random.randint(0, 255)}.0/24"
            )
            if not any(net.overlaps(u) for u in used):
                break
        else:
            raise OSError("no free private /24 for the test bridge")
        addresses = list(net.hosts())
        self._bridge = f"kob{self.tag}"
        _ip("link", "add", self._bridge, "type", "bridge")
        _ip("addr", "add", f"{addresses[0]}/24", "dev", self._bridge)
        _ip("link", "set", self._bridge, "up")
        for i in range(self.count):
            ns = f"ko{self.tag}{i}"
            outer, inner = f"kov{self.tag}{i}", f"koi{self.tag}{i}"
            _ip("netns", "add", ns)
            self.namespaces.append(ns)
            _ip("link", "add", outer, "type", "veth", "peer", "name", inner)
            _ip("link", "set", inner, "netns", ns)
            _ip("link", "set", outer, "master", self._bridge, "up")
            _ip("-n", ns, "addr", "add", f"{addresses[i + 1]}/24", "dev", inner)
            _ip("-n", ns, "link", "set", inner, "up")
            _ip("-n", ns, "link", "set", "lo", "up")
            _ip("-n", ns, "route", "add", "default", "via", str(addresses[0]))
        self.server_ip = str(addresses[0])

    def _destroy(self) -> None:
        for ns in self.namespaces:  # deleting a namespace deletes its veth pair
            with contextlib.suppress(subprocess.SubprocessError, OSError):
                _ip("netns", "del", ns)
        self.namespaces = []
        if self._bridge:
            with contextlib.suppress(subprocess.SubprocessError, OSError):
                _ip("link", "del", self._bridge)
            self._bridge = None
