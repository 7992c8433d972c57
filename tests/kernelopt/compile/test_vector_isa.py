"""kernelopt.compile.vector_isa: Inductor's C++ probe asked once per machine, replayed after."""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kernelopt.compile import vector_isa

ROOT = Path(__file__).resolve().parents[3]

# a fresh process: record (as the detached ask does) or replay, then Inductor's pick and
# the flags its C++ gets
_PICK = """
import json, sys
from kernelopt.compile import vector_isa
from torch._inductor.cpu_vec_isa import pick_vec_isa
if sys.argv[1] == "record":
    vector_isa.record_here()
else:  # any real compile-and-load probe fails the run
    import torch._inductor.cpu_vec_isa as m
    def probed(*args, **kwargs):
        raise AssertionError("probed")
    m.VecISA._probe_load = probed
vector_isa.answer_probes()  # as before a compile or a load that asks
isa = pick_vec_isa()
print(json.dumps([vector_isa.primed(), str(isa), isa.build_arch_flags()]))
"""


def _pick(tmp: Path, mode: str, **env: str) -> list:
    full = {k: v for k, v in os.environ.items() if k != vector_isa.RECORD_ENV}
    full.update({"XDG_CACHE_HOME": str(tmp), "PYTHONPATH": str(ROOT), **env})
    done = subprocess.run(
        [sys.executable, "-c", _PICK, mode], env=full, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list]:
    """One real ask, kept where the tests replay it (each real ask costs seconds of C++)."""
    cache = tmp_path_factory.mktemp("recorded")
    return cache, _pick(cache, "record")


def test_a_trusted_process_records_and_a_later_one_replays_without_probing(
    recorded: tuple[Path, list],
) -> None:
    cache, (_, isa, flags) = recorded
    kept = list((cache / "kernelopt" / "vector-isa").glob("*.json"))
    assert len(kept) == 1  # it asked for real, and kept what it found
    if not json.loads(kept[0].read_text())["answers"]:
        pytest.skip(f"Inductor asks no compile-and-load probe on this machine (picked {isa!r})")
    # the replay reaches Inductor's very answer, flags included, with every probe forbidden
    assert _pick(cache, "forbid") == [True, isa, flags]


def test_another_compilers_answers_are_not_replayed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.delenv(vector_isa.RECORD_ENV, raising=False)
    answers = [("avx2", "-mavx2 -mfma", "0" * 16, True)]
    vector_isa.write_record(answers)
    assert vector_isa.read_record() == answers
    other = {"CXX": str(tmp_path / "another-g++"), "PATH": ""}
    (tmp_path / "another-g++").write_text("")
    assert vector_isa.record_path(other) != vector_isa.record_path()
    assert vector_isa.read_record(other) is None
    record = vector_isa.record_path()
    record.write_text(json.dumps({**json.loads(record.read_text()), "key": "another"}))
    assert vector_isa.read_record() is None
    record.write_text("{not json")
    assert vector_isa.read_record() is None


def test_only_wrappers_with_cpp_kernels_ask() -> None:
    cpp = "cpp_fused_0 = async_compile.cpp_pybinding(['double*'], r'''...''')"
    assert vector_isa.has_cpp_kernels(cpp)
    assert not vector_isa.has_cpp_kernels("triton_poi_0 = async_compile.triton('x', '''...''')")


def test_answers_are_kept_for_a_sandboxed_childs_own_compiler(tmp_path: Path) -> None:
    """The parent may compile with another C++ compiler than the sandbox offers its
    children: their answers are asked for with theirs, in a trusted subprocess.  Candidates
    can write the shared Inductor cache, and the probe loads a probe library it finds
    there: the ask, which runs outside the sandbox, builds its own elsewhere."""
    import shutil

    compiler = shutil.which("c++", path="/usr/bin:/bin")
    if compiler is None:
        pytest.skip("no c++ in /usr/bin")
    shared = tmp_path / "shared-inductor"
    shared.mkdir()
    child = {"CXX": compiler, "PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)}
    child.update(
        {"XDG_CACHE_HOME": str(tmp_path / "cache"), "TORCHINDUCTOR_CACHE_DIR": str(shared)}
    )
    asking = vector_isa.keep_for(child)
    assert asking is not None and asking.wait(timeout=300) == 0
    assert list(shared.iterdir()) == []
    assert vector_isa.keep_for(child) is None  # once asked, never again
    if not any((tmp_path / "cache").rglob("*.json")):
        pytest.skip("Inductor asks no compile-and-load probe on this machine")
    assert vector_isa.read_record(child)


def test_a_no_is_asked_twice_before_it_is_kept() -> None:
    """A probe also fails on a timeout or a killed compiler: one failure is not kept."""

    class Isa:
        def __str__(self) -> str:
            return "avx2"

        def build_arch_flags(self) -> str:
            return "-mavx2"

    for replies, kept in (([False, True], True), ([False, False], False), ([True], True)):
        answers: list = []
        original = functools.partial(lambda asked, isa, code: next(asked), iter(replies))
        assert vector_isa._recorder(answers)(original, Isa(), "x") is kept
        assert [a[3] for a in answers] == [kept]


def test_children_are_asked_for_only_where_a_cpp_wrapper_was_seen(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A machine that never compiles C++ never runs the probe for a sandbox's compiler."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.delenv(vector_isa.RECORD_ENV, raising=False)
    asked: list = []
    monkeypatch.setattr(vector_isa, "keep_for", lambda env: asked.append(env))
    child = {"CXX": "/usr/bin/c++", "PATH": "/usr/bin"}
    vector_isa.keep_for_children(child)
    assert asked == []
    vector_isa.write_record([])  # this machine's own answers are kept: now it asks
    vector_isa.keep_for_children(child)
    assert asked == [child]


def test_one_ask_per_key_runs_at_a_time_across_processes(tmp_path: Path) -> None:
    child = {"CXX": "/nonexistent/g++", "PATH": "", "XDG_CACHE_HOME": str(tmp_path)}
    record = vector_isa.record_path(child)
    lock = vector_isa._take_ask_lock(record)
    assert lock is not None and vector_isa._take_ask_lock(record) is None
    old = 2 * vector_isa.ASK_STALE_S
    os.utime(lock, (lock.stat().st_atime - old, lock.stat().st_mtime - old))
    assert vector_isa._take_ask_lock(record) == lock  # a dead ask's lock is taken over


def test_processes_without_kept_answers_wait_for_the_running_ask_and_never_probe(
    tmp_path: Path, recorded: tuple[Path, list]
) -> None:
    """With the machine's ask under way (started by the first process that Inductor
    asked), two trusted processes that Inductor asks meanwhile wait for it and run no
    probe of their own (``forbid``); both get the answer a recording process gets."""
    _, (_, isa, flags) = recorded
    full = {k: v for k, v in os.environ.items() if k != vector_isa.RECORD_ENV}
    full.update({"XDG_CACHE_HOME": str(tmp_path / "fresh"), "PYTHONPATH": str(ROOT)})
    asking = vector_isa.keep_for(full)
    assert asking is not None
    running = [
        subprocess.Popen(
            [sys.executable, "-c", _PICK, "forbid"], env=full, stdout=subprocess.PIPE, text=True
        )
        for _ in range(2)
    ]
    outs = [proc.communicate(timeout=600)[0] for proc in running]
    assert asking.wait(timeout=600) == 0
    assert [proc.returncode for proc in running] == [0, 0]
    kept = list((tmp_path / "fresh" / "kernelopt" / "vector-isa").glob("*.json"))
    assert len(kept) == 1
    if not json.loads(kept[0].read_text())["answers"]:
        pytest.skip(f"Inductor asks no compile-and-load probe on this machine (picked {isa!r})")
    for out in outs:
        assert json.loads(out.strip().splitlines()[-1]) == [True, isa, flags]


def test_a_wait_for_the_ask_ends_when_the_ask_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another process's live ask is waited for until its answers are kept (a sandboxed
    child waits so for its parent's); a wait past its limit, a lock older than the limit
    (a killed ask's), or an ask this process started leaves Inductor to ask here."""
    import threading

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.delenv(vector_isa.RECORD_ENV, raising=False)
    answers = [("avx2", "-mavx2 -mfma", "0" * 16, True)]
    record = vector_isa.record_path()
    assert vector_isa._take_ask_lock(record) is not None  # another process asks
    monkeypatch.setattr(vector_isa, "keep_for", lambda env: None)
    threading.Timer(0.5, vector_isa.write_record, [answers]).start()
    assert vector_isa.await_kept(wait_s=60, poll_s=0.05) == answers
    record.unlink()
    assert vector_isa.await_kept(wait_s=0.3, poll_s=0.05) is None  # the lock stays: timed out
    lock = vector_isa._ask_lock(record)
    os.utime(lock, (lock.stat().st_atime - 120, lock.stat().st_mtime - 120))
    slept: list[float] = []
    monkeypatch.setattr(vector_isa.time, "sleep", slept.append)
    assert vector_isa.await_kept(wait_s=60, poll_s=0.05) is None
    assert slept == []  # not waited for at all: that ask died long ago
    monkeypatch.undo()
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.delenv(vector_isa.RECORD_ENV, raising=False)

    # the process that starts the ask asks for itself meanwhile: no wait
    vector_isa._ask_lock(record).unlink()
    monkeypatch.setattr(vector_isa, "keep_for", lambda env: object())
    monkeypatch.setattr(vector_isa.time, "sleep", slept.append)
    assert vector_isa.await_kept(wait_s=60, poll_s=0.05) is None and slept == []
