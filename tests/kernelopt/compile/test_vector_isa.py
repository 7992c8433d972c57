"""kernelopt.compile.vector_isa: Inductor's C++ probe asked once per machine, replayed after."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kernelopt.compile import vector_isa

ROOT = Path(__file__).resolve().parents[3]

# a fresh process: prime (or record), then Inductor's pick and the flags its C++ gets
_PICK = """
import json, sys
from kernelopt.compile import vector_isa
if sys.argv[1] == "forbid":  # any real compile-and-load probe fails the run
    import torch._inductor.cpu_vec_isa as m
    def probed(*args, **kwargs):
        raise AssertionError("probed")
    m.VecISA._probe_load = probed
from torch._inductor.cpu_vec_isa import pick_vec_isa
with vector_isa.answered():  # as around a compile or a load that asks
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


def test_a_trusted_process_records_and_a_later_one_replays_without_probing(
    tmp_path: Path,
) -> None:
    primed, isa, flags = _pick(tmp_path, "record")
    kept = list((tmp_path / "kernelopt" / "vector-isa").glob("*.json"))
    if not kept:
        pytest.skip(f"Inductor asks no compile-and-load probe on this machine (picked {isa!r})")
    assert not primed  # it asked for real, and kept what Inductor found
    assert json.loads(kept[0].read_text())["answers"]
    # the replay reaches Inductor's very answer, flags included, with every probe forbidden
    assert _pick(tmp_path, "forbid") == [True, isa, flags]


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


def test_answers_are_kept_for_a_sandboxed_childs_own_compiler(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The parent may compile with another C++ compiler than the sandbox offers its
    children: their answers are asked for with theirs, in a trusted subprocess."""
    import shutil
    import threading

    compiler = shutil.which("c++", path="/usr/bin:/bin")
    if compiler is None:
        pytest.skip("no c++ in /usr/bin")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.delenv(vector_isa.RECORD_ENV, raising=False)
    child = {"CXX": compiler, "PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)}
    child["XDG_CACHE_HOME"] = str(tmp_path)
    vector_isa.keep_for(child)
    for thread in threading.enumerate():
        if thread.name == "vector-isa-keep":
            thread.join(timeout=300)
    if not any(tmp_path.rglob("*.json")):
        pytest.skip("Inductor asks no compile-and-load probe on this machine")
    assert vector_isa.read_record(child)


def test_the_background_ask_never_loads_from_the_shared_compiler_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Candidates can write the shared Inductor cache, and the probe loads a probe library
    it finds there: the ask, which runs outside the sandbox, builds its own."""
    import threading

    seen: list[dict[str, str]] = []

    def run(argv: list[str], env: dict[str, str], **kwargs: object) -> None:
        seen.append(env)
        assert Path(env["TORCHINDUCTOR_CACHE_DIR"]).is_dir()

    monkeypatch.setattr(vector_isa.subprocess, "run", run)
    shared = tmp_path / "shared-inductor"
    child = {"CXX": "/nonexistent/c++", "PATH": "/nowhere", "XDG_CACHE_HOME": str(tmp_path)}
    child["TORCHINDUCTOR_CACHE_DIR"] = str(shared)
    vector_isa.keep_for(child)
    for thread in threading.enumerate():
        if thread.name == "vector-isa-keep":
            thread.join(timeout=60)
    assert len(seen) == 1
    private = Path(seen[0]["TORCHINDUCTOR_CACHE_DIR"])
    assert private != shared and not private.exists()  # removed once asked
    assert seen[0][vector_isa.RECORD_ENV] == str(vector_isa.record_dir(child))
