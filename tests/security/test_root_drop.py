"""A root parent's sandbox runs its child as an unprivileged uid, so RLIMIT_NPROC holds."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from gates import sandbox


@pytest.mark.skipif(os.geteuid() != 0, reason="a non-root parent never has uid 0 to drop")
def test_a_root_parent_runs_the_sandboxed_child_as_an_unprivileged_uid(monkeypatch) -> None:
    monkeypatch.delenv(sandbox.SANDBOX_ENV, raising=False)
    binary = sandbox.require()
    if not sandbox._root_mode(binary):
        pytest.skip("bwrap cannot run without a user namespace here (no CAP_SYS_ADMIN)")
    code = (
        "import os, resource; resource.setrlimit(resource.RLIMIT_NPROC, (4, 4)); n = 0\n"
        "try:\n"
        "    while n < 50:\n"
        "        pid = os.fork()\n"
        "        if pid == 0:\n"
        "            import time; time.sleep(5); os._exit(0)\n"
        "        n += 1\n"
        "except OSError:\n"
        "    pass\n"
        "print(os.getuid(), os.geteuid(), os.getgroups(), n)"
    )
    argv, env = sandbox.wrap_command([sys.executable, "-c", code])
    assert "--unshare-user" not in argv and "--unshare-all" not in argv
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    head, forks = done.stdout.strip().rsplit(" ", 1)
    uid, euid, groups = head.split(" ", 2)
    uid, euid = int(uid), int(euid)
    assert uid != 0 and euid != 0
    assert groups == "[]"  # no supplementary groups (root's would hold 0)
    assert int(forks) < 4  # the limit holds: uid 0 would have forked all 50
