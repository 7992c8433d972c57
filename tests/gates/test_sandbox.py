"""gates.sandbox in isolation: no silent fallback, the allow-list, the job's view."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from gates import sandbox
from gates.protocol import CandidateJob, InputSet, ModelSource, ReferenceJob, ScreenEntry, ScreenJob
from gates.runner import run_job
from kernelopt.contracts.screening import ScreenParams


def _job(tmp: Path) -> CandidateJob:
    return CandidateJob(
        model=ModelSource(
            kind="candidate", problem_path=str(tmp / "p.py"), candidate_path=str(tmp / "c.py")
        ),
        device="cpu",
        input_sets=[InputSet(name="seed0", seed=0)],
        inputs_dir=str(tmp / "inputs"),
        out_dir=str(tmp / "outputs"),
    )


def test_a_missing_bwrap_is_a_typed_error_not_an_unsandboxed_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("KERNELOPT_SANDBOX", raising=False)
    monkeypatch.setenv("KERNELOPT_BWRAP", str(tmp_path / "no-such-bwrap"))
    with pytest.raises(sandbox.SandboxUnavailable, match="KERNELOPT_BWRAP"):
        run_job(_job(tmp_path), tmp_path / "w", timeout_s=30, device="cpu")
    assert not (tmp_path / "w" / "child.log").exists()  # nothing ran


def test_a_bwrap_that_cannot_make_namespaces_is_reported_with_the_opt_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = tmp_path / "bwrap"
    fake.write_text("#!/bin/sh\necho 'No permissions to create new namespace' >&2\nexit 1\n")
    fake.chmod(0o755)
    monkeypatch.setenv("KERNELOPT_BWRAP", str(fake))
    with pytest.raises(sandbox.SandboxUnavailable) as info:
        sandbox.require()
    assert "No permissions" in str(info.value) and "KERNELOPT_SANDBOX=off" in str(info.value)


def test_the_environment_is_an_allow_list() -> None:
    base = {
        "OPENAI_API_KEY": "sk-x",
        "KERNELOPT_API_KEY": "k",
        "KERNELOPT_TEMPORAL_ADDRESS": "h:1",
        "KERNELOPT_HOME": "/h",
        "AWS_SECRET_ACCESS_KEY": "a",
        "CUDA_VISIBLE_DEVICES": "3",
        "TRITON_INTERPRET": "1",
    }
    env = sandbox.sandbox_env(base, {"MY_TOKEN": "t", "TORCH_LOGS": "dynamo"})
    assert env["CUDA_VISIBLE_DEVICES"] == "3" and env["TRITON_INTERPRET"] == "1"
    assert env["TORCH_LOGS"] == "dynamo"  # a caller's explicit extra
    for name in (
        "OPENAI_API_KEY",
        "KERNELOPT_API_KEY",
        "KERNELOPT_TEMPORAL_ADDRESS",
        "KERNELOPT_HOME",
        "AWS_SECRET_ACCESS_KEY",
        "MY_TOKEN",
    ):
        assert name not in env
    assert env["HOME"] == "/tmp" and env["TRITON_CACHE_DIR"] and env["TORCHINDUCTOR_CACHE_DIR"]


def test_the_view_holds_only_what_the_job_names(tmp_path: Path) -> None:
    view = sandbox.job_view(json.loads(_job(tmp_path).model_dump_json()), tmp_path / "w")
    assert set(view.ro) == {tmp_path / "p.py", tmp_path / "c.py", tmp_path / "inputs"}
    assert set(view.rw) == {tmp_path / "w", tmp_path / "outputs"}
    ref = ReferenceJob(
        problem_path=str(tmp_path / "p.py"),
        device="cpu",
        input_sets=[],
        inputs_dir=str(tmp_path / "inputs"),
        refs_dir=str(tmp_path / "refs"),
    )
    view = sandbox.job_view(json.loads(ref.model_dump_json()), tmp_path / "w")
    assert tmp_path / "inputs" in view.rw  # the reference writes the inputs candidates read


def test_a_screen_job_sees_every_candidate_it_names_read_only(tmp_path: Path) -> None:
    problem = str(tmp_path / "p.py")
    job = ScreenJob(
        device="cpu",
        seed=0,
        model_seed=0,
        inputs_dir=str(tmp_path / "inputs"),
        baseline=ModelSource(kind="eager", problem_path=problem),
        candidates=[
            ScreenEntry(
                candidate_id=c,
                model=ModelSource(
                    kind="candidate", problem_path=problem, candidate_path=str(tmp_path / c)
                ),
            )
            for c in ("a.py", "b.py")
        ],
        params=ScreenParams(),
    )
    view = sandbox.job_view(json.loads(job.model_dump_json()), tmp_path / "w")
    names = {tmp_path / n for n in ("p.py", "inputs", "a.py", "b.py")}
    assert set(view.ro) == names and len(view.ro) == len(names)  # the problem only once
    assert view.rw == [tmp_path / "w"]  # its results file lives in its own workdir


def test_a_wrapper_sees_only_the_blobs_its_json_reaches(tmp_path: Path) -> None:
    store = tmp_path / "store"

    def put(data: bytes) -> str:
        digest = hashlib.sha256(data).hexdigest()
        (store / digest[:2]).mkdir(parents=True, exist_ok=True)
        (store / digest[:2] / digest).write_bytes(data)
        return digest

    kernel = put(b"kernel source")
    other = put(b"another campaign's weights")
    listing = put(
        json.dumps({"kernels": [{"sha256": kernel, "media_type": "text/plain"}]}).encode()
    )
    compiled = tmp_path / "compiled.json"
    compiled.write_text(
        json.dumps({"wrapper": {"sha256": listing, "media_type": "application/json"}})
    )
    blobs = sandbox.store_blobs(store, [compiled])
    names = {b.name for b in blobs}
    assert names == {listing, kernel} and other not in names


def test_limits_are_set_for_good(tmp_path: Path) -> None:
    import resource
    import subprocess
    import sys

    limits = sandbox.SandboxLimits(
        data_bytes=2**32, nproc=4096, nofile=256, fsize_bytes=2**20, cpu_s=100
    )
    sandbox.write_limits(tmp_path, limits)
    code = (
        "import resource, sys; from gates.sandbox import apply_limits; apply_limits(sys.argv[1]);"
        "print(resource.getrlimit(resource.RLIMIT_NOFILE), resource.getrlimit(resource.RLIMIT_FSIZE));"
        "resource.setrlimit(resource.RLIMIT_NOFILE, (512, 512))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, check=False
    )
    assert "(256, 256) (1048576, 1048576)" in done.stdout
    assert done.returncode != 0 and "ValueError" in done.stderr  # cannot raise them again
    assert resource.getrlimit(resource.RLIMIT_NOFILE)[0] != 256  # only the child


def test_pythonpath_directories_are_importable_read_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The GPU host installs wheels into /tmp/site on PYTHONPATH: the sandbox must see them."""
    import os
    import subprocess
    import sys

    monkeypatch.delenv("KERNELOPT_SANDBOX", raising=False)
    site = tmp_path / "site"
    site.mkdir()
    (site / "carried_wheel.py").write_text("VALUE = 42\n")
    monkeypatch.setenv("PYTHONPATH", f"{site}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    code = (
        "import carried_wheel, pathlib, sys; print(carried_wheel.VALUE);"
        "pathlib.Path(carried_wheel.__file__).write_text('VALUE = 0')"
    )
    argv, env = sandbox.wrap_command([sys.executable, "-c", code])
    done = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
    assert done.stdout.strip() == "42", done.stderr[-2000:]
    assert "Read-only file system" in done.stderr
    assert (site / "carried_wheel.py").read_text() == "VALUE = 42\n"


def test_the_machines_vector_isa_answers_are_readable_never_writable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A gate child replays the trusted answers (no probe of its own) but cannot rewrite
    them: a wrong answer would change the C++ the baseline's kernels compile to."""
    import subprocess
    import sys

    from kernelopt.compile import vector_isa

    monkeypatch.delenv("KERNELOPT_SANDBOX", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setattr(vector_isa, "keep_for", lambda env: None)  # no real answers
    code = (
        "from kernelopt.compile import vector_isa as v; print(v.read_record());"
        "v.record_path().write_text('{}')"
    )
    argv, env = sandbox.wrap_command([sys.executable, "-c", code])
    outside = {**env, vector_isa.RECORD_ENV: str(vector_isa.record_dir())}
    vector_isa.write_record([("avx2", "-mavx2", "0" * 16, True)], outside)
    done = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
    assert done.stdout.strip() == "[('avx2', '-mavx2', '0000000000000000', True)]", done.stderr
    assert "Read-only file system" in done.stderr
    assert vector_isa.read_record(outside) is not None


def test_a_sandboxed_child_with_no_kept_answers_asks_itself_and_keeps_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import subprocess
    import sys

    from kernelopt.compile import vector_isa

    monkeypatch.delenv("KERNELOPT_SANDBOX", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setattr(vector_isa, "keep_for", lambda env: None)
    code = (
        "from torch._inductor.cpu_vec_isa import pick_vec_isa\n"
        "from kernelopt.compile import vector_isa as v\n"
        "v.answer_probes()\nprint(pick_vec_isa(), v.primed())\n"
    )
    argv, env = sandbox.wrap_command([sys.executable, "-c", code])
    done = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
    assert done.returncode == 0 and done.stdout.strip().endswith("False"), done.stderr[-2000:]
    assert list(vector_isa.record_dir().iterdir()) == []


def test_a_sandboxed_child_waits_for_its_parents_running_ask_unless_it_was_started_for_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The parent's ask for the sandbox's compiler keeps its answers where the child sees
    them read-only: a child made while it runs waits and replays them (the bind shows the
    file written after the child started); the child the ask was started for asks itself
    meanwhile, as the ask's starter does."""
    import subprocess
    import sys
    import threading

    from kernelopt.compile import vector_isa

    monkeypatch.delenv("KERNELOPT_SANDBOX", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    answers = [("avx2", "-mavx2", "0" * 16, True)]
    code = (
        "from kernelopt.compile import vector_isa as v\n"
        "print(v.await_kept(wait_s=120, poll_s=0.05))\n"
    )
    for started_here in (False, True):
        monkeypatch.setattr(
            vector_isa, "keep_for_children", lambda env, s=started_here: object() if s else None
        )
        argv, env = sandbox.wrap_command([sys.executable, "-c", code])
        outside = {**env, vector_isa.RECORD_ENV: str(vector_isa.record_dir())}
        record = vector_isa.record_path(outside)
        record.unlink(missing_ok=True)
        assert vector_isa._take_ask_lock(record) is not None  # the parent's ask runs
        kept = threading.Timer(2.0, vector_isa.write_record, [answers, outside])
        kept.start()
        done = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
        kept.join()
        vector_isa._ask_lock(record).unlink()
        assert done.returncode == 0, done.stderr[-2000:]
        want = "None" if started_here else str(answers)
        assert done.stdout.strip() == want, (started_here, done.stderr[-2000:])


def test_a_misnamed_answers_folder_is_never_shown(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """KERNELOPT_VECTOR_ISA_DIR set to a home (or any folder holding private places) binds
    nothing: the children then ask Inductor themselves."""
    from kernelopt.compile import vector_isa

    monkeypatch.setenv(vector_isa.RECORD_ENV, str(Path.home()))
    assert sandbox.VECTOR_ISA_VIEW not in sandbox.bwrap_args("bwrap")
    monkeypatch.setenv(vector_isa.RECORD_ENV, str(tmp_path / "answers"))
    assert sandbox.VECTOR_ISA_VIEW in sandbox.bwrap_args("bwrap")
