"""A host worth attacking: a secret-laden environment, a home, a store, a frontend port."""

from __future__ import annotations

import hashlib
import shutil
import socket
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from gates.runner import zygote_env
from gates.zygote import Zygote

SECRET = "sk-test-do-not-leak-4f1c2a"


@dataclass
class Bait:
    home: Path  # HOME, with secret.txt
    kopt_home: Path  # KERNELOPT_HOME: artifacts/ and workers/
    blob: Path  # another campaign's artifact
    listener: socket.socket  # stands for the Temporal frontend on loopback
    port: int

    def snapshot(self) -> dict[str, tuple[int, str]]:
        """Every file under both homes: size and digest (compiler caches excluded)."""
        out: dict[str, tuple[int, str]] = {}
        for root in (self.home, self.kopt_home):
            for path in sorted(root.rglob("*")):
                if ".triton" in path.parts or "compiler-caches" in path.parts:
                    continue
                if path.is_file() and not path.is_symlink():
                    data = path.read_bytes()
                    out[str(path)] = (len(data), hashlib.sha256(data).hexdigest())
                elif path.is_dir():
                    out[str(path)] = (-1, "dir")
        return out

    def connections(self) -> int:
        """Connections the listener accepted since the last call."""
        count = 0
        self.listener.setblocking(False)
        while True:
            try:
                conn, _ = self.listener.accept()
            except BlockingIOError:
                return count
            conn.close()
            count += 1


@pytest.fixture(scope="package")  # its environment must not leak into other packages
def bait() -> Iterator[Bait]:
    # Not under /tmp: every sandbox has a private /tmp, where a plant would land unseen.
    root = Path(tempfile.mkdtemp(prefix="kernelopt-bait-", dir="/var/tmp"))
    home, kopt = root / "home", root / "kernelopt-home"
    home.mkdir()
    (home / "secret.txt").write_text(SECRET)
    data = b"weights of campaign B: " + SECRET.encode()
    digest = hashlib.sha256(data).hexdigest()
    blob = kopt / "artifacts" / digest[:2] / digest
    blob.parent.mkdir(parents=True)
    blob.write_bytes(data)
    (kopt / "workers").mkdir()
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("0.0.0.0", 0))
    listener.listen(16)
    port = listener.getsockname()[1]
    with pytest.MonkeyPatch.context() as env:
        env.setenv("HOME", str(home))
        env.setenv("KERNELOPT_HOME", str(kopt))
        env.setenv("KERNELOPT_GATES_SMALL", "1")
        env.setenv("OPENAI_API_KEY", SECRET)
        env.setenv("KERNELOPT_API_KEY", SECRET)
        env.setenv("KERNELOPT_TEMPORAL_ADDRESS", f"127.0.0.1:{port}")
        env.setenv("KERNELOPT_SANDBOX_NPROC", "128")  # threads count too
        env.setenv("KERNELOPT_SANDBOX_FSIZE_MB", "8")
        env.setenv("KERNELOPT_SANDBOX_TMP_MB", "16")
        env.delenv("KERNELOPT_SANDBOX", raising=False)
        yield Bait(home, kopt, blob, listener, port)
    listener.close()
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="package")  # its environment must not leak into other packages
def zygote(bait: Bait) -> Iterator[Zygote]:
    """A sandboxed CPU zygote, started with the bait environment in place."""
    z = Zygote(zygote_env("cpu"), start_timeout_s=120.0)
    yield z
    z.close()
