"""Hostile candidates through the real gate runner: each attack is contained.

Every candidate attacks at import, in a real sandboxed child (spawned, and
forked from a sandboxed zygote), on the CPU.  Each test checks the host side
-- nothing outside the job's scratch directory changed, no connection reached
the listener, no secret reached the child's files -- and that the child's
outcome names what was refused.  With ``KERNELOPT_SANDBOX=off`` each of them
fails (the attacks succeed), which is what makes them tests.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest
import torch

from gates.protocol import CandidateJob, InputSet, ModelSource
from gates.runner import ChildOutcome, run_job
from gates.sandbox import REPO_ROOT
from gates.zygote import Zygote
from tests.security.conftest import SECRET, Bait
from tests.support.processes import descendants, live_parents

CANDIDATES = Path(__file__).parent / "candidates"
PROBLEM = REPO_ROOT / "tests" / "problems" / "gates" / "swish_bias.py"
LAUNCHES = ["spawned", "forked"]


def _attack(
    name: str, bait: dict, tmp: Path, launch: str, zygote: Zygote, timeout_s: float = 60
) -> tuple[ChildOutcome, dict]:
    """Run candidate ``name`` with ``bait`` filled in; its outcome and what it reported."""
    source = (CANDIDATES / f"{name}.py").read_text()
    marker = "BAIT: dict = {}"
    assert marker in source
    candidate = tmp / f"{name}.py"
    candidate.write_text(source.replace(marker, f"BAIT: dict = {json.dumps(bait)}", 1))
    inputs = tmp / "inputs"
    inputs.mkdir(exist_ok=True)
    torch.save([torch.randn(8, 64)], inputs / "seed0.pt")
    job = CandidateJob(
        model=ModelSource(
            kind="candidate", problem_path=str(PROBLEM), candidate_path=str(candidate)
        ),
        device="cpu",
        input_sets=[InputSet(name="seed0", seed=0)],
        inputs_dir=str(inputs),
        out_dir=str(tmp / "outputs"),
    )
    workdir = tmp / "work"
    via = zygote if launch == "forked" else None
    outcome = run_job(job, workdir, timeout_s=timeout_s, device="cpu", via=via)
    report_path = workdir / "report.json"
    report = json.loads(report_path.read_text()) if report_path.is_file() else {}
    return outcome, report


def _files_text(directory: Path) -> str:
    """Everything the child left behind, as text (to look for leaked secrets)."""
    return "".join(
        p.read_bytes().decode(errors="replace") for p in directory.rglob("*") if p.is_file()
    )


@pytest.fixture(params=LAUNCHES)
def launch(request: pytest.FixtureRequest) -> str:
    return request.param


def test_the_llm_key_and_control_plane_settings_are_not_in_the_environment(
    bait: Bait, zygote: Zygote, tmp_path: Path, launch: str
) -> None:
    outcome, report = _attack("env_key", {}, tmp_path, launch, zygote)
    env = report["env"]
    assert "OPENAI_API_KEY" not in env and "KERNELOPT_API_KEY" not in env
    assert not [k for k in env if k.startswith("KERNELOPT_TEMPORAL") or k == "KERNELOPT_HOME"]
    assert env.get("HOME") != str(bait.home)
    assert SECRET not in _files_text(tmp_path / "work")
    assert outcome.status == "exception" and outcome.error_type == "KeyError"
    assert "OPENAI_API_KEY" in outcome.describe()


def test_the_temporal_frontend_on_loopback_is_unreachable(
    bait: Bait, zygote: Zygote, tmp_path: Path, launch: str
) -> None:
    bait.connections()
    outcome, report = _attack("temporal_frontend", {"port": bait.port}, tmp_path, launch, zygote)
    assert report == {"started": True}
    assert bait.connections() == 0
    assert outcome.status == "exception" and outcome.error_type == "ConnectionRefusedError"


def _host_address() -> str:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("192.0.2.123", 9))  # no packet is sent: this only picks a route
        except OSError:
            pytest.skip("this host has no routed network address")
        return probe.getsockname()[0]


def test_no_network_beyond_the_sandbox(
    bait: Bait, zygote: Zygote, tmp_path: Path, launch: str
) -> None:
    host = _host_address()
    if host.startswith("127."):
        pytest.skip("this host has no routed network address")
    bait.connections()
    outcome, report = _attack(
        "network_out", {"host": host, "port": bait.port}, tmp_path, launch, zygote
    )
    assert report == {"started": True}
    assert bait.connections() == 0
    assert outcome.status == "exception"
    assert "unreachable" in outcome.message.lower(), outcome.describe()


@pytest.mark.parametrize("name", ["read_store", "corrupt_store", "plant_pidfile", "home_secret"])
def test_the_store_workers_dir_and_home_are_not_in_the_view(
    bait: Bait, zygote: Zygote, tmp_path: Path, launch: str, name: str
) -> None:
    before = bait.snapshot()
    info = {"blob": str(bait.blob), "workers": str(bait.kopt_home / "workers")}
    outcome, report = _attack(name, {**info, "home": str(bait.home)}, tmp_path, launch, zygote)
    assert bait.snapshot() == before  # nothing read back, nothing planted, nothing corrupted
    assert "stolen" not in report
    # HOME holds only the compiler cache the sandbox shares (Triton's default is ~/.triton)
    assert set(report.get("listing", [])) <= {".triton"}
    assert SECRET not in _files_text(tmp_path / "work")
    assert outcome.status == "exception", outcome.describe()
    refused = ("No such file or directory", "Read-only file system")
    assert any(r in outcome.describe() for r in refused), outcome.describe()


def test_host_files_outside_the_view_are_absent(
    bait: Bait, zygote: Zygote, tmp_path: Path, launch: str
) -> None:
    outcome, report = _attack("host_files", {}, tmp_path, launch, zygote)
    assert "stolen" not in report
    assert "/home" not in report["seen"]
    # /root only where the interpreter itself lives there (pyenv on the CI image)
    python_homes = {
        Path(p).relative_to("/root").parts[0]
        for p in (sys.base_prefix, sys.prefix)
        if p.startswith("/root/")
    }
    assert set(report["seen"].get("/root", [])) <= python_homes
    assert "passwd" not in report["seen"].get("/etc", [])
    assert "root:x:0:0" not in _files_text(tmp_path / "work")
    assert outcome.error_type == "FileNotFoundError" and "/etc/passwd" in outcome.describe()


def test_the_project_and_the_venv_are_read_only(
    bait: Bait, zygote: Zygote, tmp_path: Path, launch: str
) -> None:
    name = f"backdoor-{uuid.uuid4().hex[:8]}.py"
    targets = [REPO_ROOT / name, Path(sys.prefix) / name]
    try:
        outcome, _ = _attack(
            "write_project", {"project": str(REPO_ROOT), "name": name}, tmp_path, launch, zygote
        )
        assert not any(t.exists() for t in targets)
        assert outcome.error_type == "OSError" and "Read-only file system" in outcome.describe()
    finally:
        for target in targets:
            target.unlink(missing_ok=True)


def test_a_module_planted_on_the_import_path_never_reaches_a_later_child(
    bait: Bait, zygote: Zygote, tmp_path: Path, launch: str
) -> None:
    """The class: a child writes ``NAME.py`` wherever ``sys.path`` points, and a later
    trusted child of the same sandbox would import it; no entry may be writable."""
    name = f"planted_{uuid.uuid4().hex[:8]}"
    (tmp_path / "plant").mkdir()
    (tmp_path / "probe").mkdir()
    outcome, report = _attack("plant_module", {"name": name}, tmp_path / "plant", launch, zygote)
    try:
        assert outcome.ok, outcome.describe()
        assert report["planted"] == [], report
        probed, probe = _attack(
            "plant_module", {"name": name, "probe": 1}, tmp_path / "probe", launch, zygote
        )
        assert probe == {"started": True, "found": None}, probed.describe()
    finally:
        for entry in report.get("planted", []):
            Path(entry or ".", f"{name}.py").unlink(missing_ok=True)


def test_files_left_where_tools_keep_state_never_reach_a_later_child(
    bait: Bait, zygote: Zygote, tmp_path: Path, launch: str
) -> None:
    """The class: a child leaves a file under its ``HOME``, its ``TMPDIR`` or its user
    site (children forked from one zygote share its ``/tmp``), and a later trusted child
    would read or run it; each job has a scratch of its own, and no user site runs (in a
    virtual environment Python runs none anyway; a system interpreter would)."""
    name = f"planted_{uuid.uuid4().hex[:8]}"
    (tmp_path / "plant").mkdir()
    (tmp_path / "probe").mkdir()
    outcome, report = _attack("plant_scratch", {"name": name}, tmp_path / "plant", launch, zygote)
    assert outcome.ok, outcome.describe()
    assert report["planted"] == ["home", "tmpdir", "user_site"], report  # its own, writable
    probed, probe = _attack(
        "plant_scratch",
        {"name": name, "probe": 1, "user_base": report["user_base"]},
        tmp_path / "probe",
        launch,
        zygote,
    )
    assert probed.ok, probed.describe()
    assert probe["found"] == [] and probe["pth_ran"] is False, probe
    if launch == "forked":  # the zygote imported Inductor: its headers are in the guarded cache
        assert probe["header_dir"] == os.path.join(probe["inductor_cache"], "precompiled_headers")


def test_a_sibling_child_cannot_be_inspected_or_attached(
    bait: Bait, zygote: Zygote, tmp_path: Path
) -> None:
    """Two children of one sandboxed zygote at once (as a prestarted timing child runs beside
    the candidate's): the candidate reaches neither the sibling's /proc files nor ptrace."""
    from gates.go_signal import live_workdir

    (tmp_path / "sibling").mkdir()
    (tmp_path / "attacker").mkdir()
    done: list[tuple[ChildOutcome, dict]] = []
    sibling = threading.Thread(
        target=lambda: done.append(
            _attack("inspect_sibling", {"linger": 8}, tmp_path / "sibling", "forked", zygote)
        )
    )
    sibling.start()
    try:
        deadline = time.monotonic() + 60
        live = tmp_path / "sibling" / "work" / "report.json"
        while time.monotonic() < deadline:
            live = live_workdir(tmp_path / "sibling" / "work") / "report.json"
            if live.is_file() and live.read_text():
                break
            time.sleep(0.05)
        pid = json.loads(live.read_text())["pid"]
        outcome, report = _attack(
            "inspect_sibling", {"pid": pid}, tmp_path / "attacker", "forked", zygote
        )
        assert outcome.ok, outcome.describe()
        assert report["ptrace"] == "refused", report
        assert not [k for k, v in report.items() if v == "reached"], report
    finally:
        sibling.join(timeout=60)
    assert done and done[0][0].ok, done


def test_the_zygote_that_forks_every_child_cannot_be_attached(
    bait: Bait, zygote: Zygote, tmp_path: Path, launch: str
) -> None:
    """A candidate attached to its parent (forked: the zygote every trusted child is forked
    from; spawned: the sandbox's init) could rewrite every later child; it reaches nothing."""
    outcome, report = _attack("inspect_sibling", {"pid": "parent"}, tmp_path, launch, zygote)
    assert outcome.ok, outcome.describe()
    assert report["ptrace"] == "refused", report
    assert not [k for k, v in report.items() if v == "reached"], report


def _processes_with(token: str) -> list[int]:
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            if token.encode() in cmdline.read_bytes():
                found.append(int(cmdline.parent.name))
        except OSError:
            continue
    return found


def test_a_daemon_dies_with_its_job(
    bait: Bait, zygote: Zygote, tmp_path: Path, launch: str
) -> None:
    token = f"kernelopt-daemon-{uuid.uuid4().hex}"
    try:
        outcome, report = _attack("daemon", {"token": token}, tmp_path, launch, zygote)
        assert outcome.ok and report == {"started": True}
        deadline = time.monotonic() + 5
        while _processes_with(token) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert _processes_with(token) == []
    finally:
        for pid in _processes_with(token):
            os.kill(pid, 9)


def test_a_fork_bomb_hits_the_process_limit_and_dies_with_its_job(
    bait: Bait, zygote: Zygote, tmp_path: Path, launch: str
) -> None:
    """RLIMIT_NPROC stops it, also under a root parent (whose sandboxes run the child as an
    unprivileged uid: Linux exempts uid 0 from the limit); nothing it forked survives."""
    cap = 400  # above the test's limit: reaching it means there was no limit
    limit = int(os.environ["KERNELOPT_SANDBOX_NPROC"])
    before = _existing(zygote)  # the session's own servers and workers are not the bomb's
    started = time.monotonic()
    outcome, report = _attack("fork_bomb", {"cap": cap}, tmp_path, launch, zygote, 30)
    assert report["forks"] > 0
    if _nproc_holds():
        assert report["forks"] < limit and "BlockingIOError" in report["error"], report
        assert outcome.status == "exception" and "fork refused" in outcome.describe()
    assert _sleepers(zygote, before) == []
    assert time.monotonic() - started < 30  # contained at once, not by the job's timeout


def _nproc_holds() -> bool:
    """Whether RLIMIT_NPROC can hold here: not root, or root that can drop to another uid
    (bwrap without a user namespace needs CAP_SYS_ADMIN; docs/security.md)."""
    from gates import sandbox

    return os.geteuid() != 0 or sandbox._root_mode(sandbox.require())


def _existing(zygote: Zygote) -> set[int]:
    """Processes below this one or the zygote before an attack (fixtures' servers, workers)."""
    return set(descendants(live_parents(), {os.getpid(), zygote._proc.pid}))


def _sleepers(zygote: Zygote, before: set[int]) -> list[int]:
    """Host processes still in the sandboxes (below this process or below the zygote)."""
    deadline = time.monotonic() + 10
    while True:
        roots = {os.getpid(), zygote._proc.pid}
        tree = live_parents()
        stray = [
            p
            for p in descendants(tree, roots)
            if p not in _zygote_chain(tree, zygote) and p not in before
        ]
        if not stray or time.monotonic() > deadline:
            return stray
        time.sleep(0.2)


def _zygote_chain(tree: dict[int, int], zygote: Zygote) -> set[int]:
    """bwrap, its init and the zygote itself: the processes that are always there."""
    chain = {zygote._proc.pid}
    while True:
        kids = {p for p, parent in tree.items() if parent in chain} - chain
        if len(kids) != 1:
            return chain
        chain |= kids


def test_a_disk_filler_hits_the_file_size_and_tmp_limits(
    bait: Bait, zygote: Zygote, tmp_path: Path, launch: str
) -> None:
    outcome, report = _attack("disk_filler", {"cap_mb": 40}, tmp_path, launch, zygote)
    mib = 2**20
    assert report["sizes"]["fill.bin"] <= 8 * mib  # KERNELOPT_SANDBOX_FSIZE_MB
    assert report["sizes"]["/tmp/fill.bin"] <= 16 * mib  # KERNELOPT_SANDBOX_TMP_MB
    assert "File too large" in report["errors"]["fill.bin"]
    assert (
        "File too large" in report["errors"]["/tmp/fill.bin"]
        or "No space left" in (report["errors"]["/tmp/fill.bin"])
    )
    assert not Path("/tmp/fill.bin").exists() or Path("/tmp/fill.bin").stat().st_size != 40 * mib
    assert outcome.status == "exception" and "disk writes refused" in outcome.describe()


def test_an_honest_candidate_can_still_compile_cpp(
    bait: Bait, zygote: Zygote, tmp_path: Path, launch: str
) -> None:
    """The sandbox must not take the toolchain away: gcc called by bare name from a build
    directory below the private /tmp could not find ``cc1plus`` (every ``load_inline``
    candidate failed at import); children get ``CXX`` as an absolute path."""
    outcome, report = _attack("compiles_cpp", {}, tmp_path, launch, zygote, timeout_s=120)
    assert report["rc"] == 0, report["stderr"]
    assert outcome.ok, outcome.describe()
