"""The worker containers can create bubblewrap's namespaces (checked without Docker)."""

from __future__ import annotations

import json
import re
from pathlib import Path

from tests.deploy.yaml_subset import load

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
PROFILE = DEPLOY / "seccomp-bwrap.json"
WORKERS = ("worker-cpu", "worker-gpu0", "worker-gpu1")
NAMESPACE_SYSCALLS = {"unshare", "clone", "clone3", "setns", "mount", "umount2", "pivot_root"}
HOST_WIDE = {"init_module", "finit_module", "kexec_load", "bpf", "reboot", "keyctl", "swapon"}


def _blocked(profile: dict) -> set[str]:
    return {
        name
        for rule in profile["syscalls"]
        if rule["action"] != "SCMP_ACT_ALLOW"
        for name in rule["names"]
    }


def test_the_profile_allows_bubblewraps_namespaces_and_refuses_host_wide_syscalls() -> None:
    profile = json.loads(PROFILE.read_text())
    assert profile["defaultAction"] == "SCMP_ACT_ALLOW"
    blocked = _blocked(profile)
    assert not blocked & NAMESPACE_SYSCALLS
    assert blocked >= HOST_WIDE
    for rule in profile["syscalls"]:
        assert rule["action"] in ("SCMP_ACT_ERRNO", "SCMP_ACT_ALLOW")
        assert all(re.fullmatch(r"[a-z_0-9]+", name) for name in rule["names"])


def test_every_worker_runs_with_the_profile_and_the_image_has_bubblewrap() -> None:
    services = load(DEPLOY / "compose.yaml")["services"]
    for name in WORKERS:
        options = services[name].get("security_opt", [])
        assert "apparmor=unconfined" in options, name
        seccomp = [o.split("=", 1)[1] for o in options if o.startswith("seccomp=")]
        assert seccomp and (DEPLOY / seccomp[0]).resolve() == PROFILE, name
        assert "cap_add" not in services[name] and not services[name].get("privileged"), name
    dockerfile = (DEPLOY / "Dockerfile").read_text()
    stages = re.split(r"^FROM ", dockerfile, flags=re.MULTILINE)
    targets = {s.split()[2]: s for s in stages[1:] if " AS " in s.split("\n")[0]}
    for target in ("cpu", "gpu"):
        assert re.search(r"apt-get install[^\n]*\\?\n?[^\n]*\bbubblewrap\b", targets[target]), (
            target
        )


def test_the_worker_pods_use_the_profile() -> None:
    for name in ("cpu-worker.yaml", "gpu-worker.yaml"):
        pod = load(DEPLOY / "k8s" / name)["spec"]["template"]["spec"]["securityContext"]
        assert pod["seccompProfile"]["type"] == "Localhost", name
        assert pod["seccompProfile"]["localhostProfile"].endswith("/" + PROFILE.name), name
        assert pod["appArmorProfile"]["type"] == "Unconfined", name
        assert pod["runAsNonRoot"] is True, name  # the process limit holds for non-root
