"""Inductor's CPU vector-instruction probe, answered once per machine.

A wrapper with C++ kernels (a CPU tensor, a ``.item()`` turned into a scalar) makes
Inductor ask which vector instructions the machine's compiler and CPU support. It asks
by compiling a probe per instruction set and loading each in a fresh Python, which on
some torch versions imports torch: tens of seconds in every fresh process that loads
such a wrapper, every gate child included. The answers depend on the machine and the
compiler alone, so a detached process asks once and keeps them in the user's cache
(which no sandboxed process can write), and every later process replays them instead
of asking again.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import structlog

log = structlog.get_logger(__name__)

# The folder of kept answers, named by a trusted parent for its children. A sandboxed
# child sees it through a read-only bind, so it replays and never keeps.
RECORD_ENV = "KERNELOPT_VECTOR_ISA_DIR"
# One probe's answer: instruction set, its compiler flags, digest of the probe's code, ok
Answer = tuple[str, str, str, bool]
_CPP_KERNELS = re.compile(r"\basync_compile\.cpp")
_primed = False


def has_cpp_kernels(wrapper_source: str) -> bool:
    """Does loading this Inductor wrapper compile C++ kernels (and so ask the probe)?"""
    return bool(_CPP_KERNELS.search(wrapper_source))


def record_dir(env: Mapping[str, str] | None = None) -> Path:
    """The folder of kept answers: the one ``env`` names, else the user's cache."""
    env = os.environ if env is None else env
    named = env.get(RECORD_ENV)
    if named:
        return Path(named)
    cache = env.get("XDG_CACHE_HOME") or str(Path(env.get("HOME") or Path.home()) / ".cache")
    return Path(cache) / "kernelopt" / "vector-isa"


def record_path(env: Mapping[str, str] | None = None) -> Path:
    """The answers for the compiler ``env`` names (this process's by default): one file
    per machine key, since a sandboxed child may compile with another compiler."""
    return record_dir(env) / f"{machine_key(env)[:24]}.json"


def key_parts(env: Mapping[str, str] | None = None) -> list[str]:
    """What the answers depend on: torch, the machine, the C++ compiler and the CPU
    (torch's version read from its metadata: a parent that only builds a sandbox's
    environment need not import it)."""
    from importlib import metadata

    try:
        torch_version = metadata.version("torch")
    except metadata.PackageNotFoundError:
        torch_version = ""
    env = os.environ if env is None else env
    # the compiler Inductor runs: CXX, else its default g++; resolved by path, since a
    # sandboxed process (whose CXX is absolute) may fail ``which``'s access() check
    compiler = env.get("CXX") or shutil.which("g++", path=env.get("PATH")) or ""
    compiler = os.path.realpath(compiler) if compiler and os.path.exists(compiler) else ""
    flags = ""
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith(("flags", "Features")):
                flags = line
                break
    return [torch_version, platform.machine(), compiler, flags]


_KEYS: dict[tuple[str, str], str] = {}


def machine_key(env: Mapping[str, str] | None = None) -> str:
    """A digest of ``key_parts``: answers kept under another key are not replayed.
    Worked out once per compiler setting (a gate child's environment is made per job)."""
    env = os.environ if env is None else env
    setting = (env.get("CXX", ""), env.get("PATH", ""))
    if setting not in _KEYS:
        _KEYS[setting] = hashlib.sha256("\n".join(key_parts(env)).encode()).hexdigest()
    return _KEYS[setting]


def _probe_key(isa: Any, code: str) -> tuple[str, str, str]:
    """What identifies one compile-and-load probe: the set, its flags and its code."""
    digest = hashlib.sha256(code.encode()).hexdigest()[:16]
    return str(isa), str(isa.build_arch_flags()), digest


@contextlib.contextmanager
def _probes_answered_by(answer: Callable[[Callable[..., bool], Any, str], bool]) -> Iterator[None]:
    """Inductor's ``VecISA.check_build`` goes through ``answer(original, isa, code)``."""
    from torch._inductor.cpu_vec_isa import VecISA

    original = VecISA.check_build

    def check_build(self: Any, code: str) -> bool:
        return answer(original, self, code)

    VecISA.check_build = check_build  # type: ignore[method-assign]
    try:
        yield
    finally:
        VecISA.check_build = original  # type: ignore[method-assign]


def _recorder(answers: list[Answer]) -> Callable[[Callable[..., bool], Any, str], bool]:
    """An answerer that asks for real and appends each answer to ``answers``. A "no" is
    asked again before it is kept: a probe also fails on a timeout or a killed compiler,
    and a kept "no" would hold every later process to fewer instructions."""

    def answer(original: Callable[..., bool], isa: Any, code: str) -> bool:
        ok = bool(original(isa, code)) or bool(original(isa, code))
        answers.append((*_probe_key(isa, code), ok))
        return ok

    return answer


def prime(answers: list[Answer]) -> None:
    """Answer Inductor's probe in this process from ``answers``: no compile, no
    subprocess (a probe they do not cover runs for real). Where Inductor's probe is not
    what this module knows, the process asks as it always did."""
    known = {tuple(a[:3]): bool(a[3]) for a in answers}

    def answer(original: Callable[..., bool], isa: Any, code: str) -> bool:
        key = _probe_key(isa, code)
        return known[key] if key in known else bool(original(isa, code))

    try:
        from torch._inductor.cpu_vec_isa import pick_vec_isa

        with _probes_answered_by(answer):
            pick_vec_isa()
    except Exception as exc:  # a torch whose probe has another shape
        log.warning("vector_isa_prime_failed", error=f"{type(exc).__name__}: {exc}")


def read_record(env: Mapping[str, str] | None = None) -> list[Answer] | None:
    """The answers kept for the compiler ``env`` names (this process's by default),
    None if none are (or the file holds another key's)."""
    try:
        saved = json.loads(record_path(env).read_text())
        if saved["key"] != machine_key(env):
            return None
        return [(str(a), str(b), str(c), bool(d)) for a, b, c, d in saved["answers"]]
    except (OSError, ValueError, KeyError, TypeError):
        return None


def write_record(answers: list[Answer], env: Mapping[str, str] | None = None) -> None:
    """Keep the answers for the compiler ``env`` names (written whole, then renamed).
    Not the store's ``write_atomic``: its files are owner-only, and the sandbox's user
    must read these."""
    path = record_path(env)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    tmp.write_text(json.dumps({"key": machine_key(env), "answers": answers}))
    os.replace(tmp, path)


def primed() -> bool:
    """Has this process replayed the kept answers?"""
    return _primed


def replay_kept() -> bool:
    """Replay this machine's kept answers in this process, if there are any (never
    asks). True once replayed."""
    global _primed
    if not _primed:
        answers = read_record()
        if answers is not None:
            _primed = True
            prime(answers)
    return _primed


def answer_probes() -> None:
    """Before a compile or a wrapper load, which may make Inductor ask: replay the kept
    answers; where there are none, a process that Inductor asks waits for the machine's
    one ask for its compiler (``await_kept``) and answers from it, so processes that
    load C++ wrappers at once share one ask instead of each running its own. A
    sandboxed child cannot start an ask; it waits for the one its parent started, and
    asks itself where none runs.

    No probe is ever run for its own sake: a model without C++ kernels costs nothing.
    """
    if not replay_kept():
        _answer_from_the_ask()


_ANSWERING = threading.Lock()
_AWAITING = threading.Lock()
_answering = False


def _answer_from_the_ask() -> None:
    """From now on in this process, Inductor's probes are answered from the machine's
    one ask: at the first, the kept answers are awaited; a probe they do not cover (or
    none kept in time) runs for real. Installed once and left in place: its answers are
    the ones Inductor would find, and a patch undone around each compile would undo
    another thread's."""
    global _answering
    with _ANSWERING:
        if _answering:
            return
        from torch._inductor.cpu_vec_isa import VecISA

        original = VecISA.check_build
        known: dict[tuple[str, str, str], bool] = {}
        awaited: list[bool] = []

        def check_build(self: Any, code: str) -> bool:
            with _AWAITING:  # threads that probe meanwhile wait for the same answers
                if not awaited:
                    awaited.append(True)
                    known.update({tuple(a[:3]): bool(a[3]) for a in await_kept() or []})
            key = _probe_key(self, code)
            return known[key] if key in known else bool(original(self, code))

        VecISA.check_build = check_build  # type: ignore[method-assign]
        _answering = True


ASK_WAIT_S = 240.0  # the longest a process waits for the machine's ask before asking itself
# Set by a parent that started the ask for a sandboxed child's compiler as it made the
# child's environment: that child asks for itself meanwhile, as the ask's starter does.
ASK_YOURSELF_ENV = "KERNELOPT_VECTOR_ISA_ASK_YOURSELF"


def await_kept(wait_s: float = ASK_WAIT_S, poll_s: float = 0.2) -> list[Answer] | None:
    """This machine's kept answers, once its one ask has kept them: a running ask is
    waited for. None when the ask ended without keeping them, after ``wait_s`` (of this
    wait, or of the ask's age: a killed ask's lock stays behind), or at once where this
    process started the ask (``keep_for``): it asks for itself meanwhile, as Inductor
    would, rather than wait for a fresh interpreter to import torch first."""
    global _primed
    if keep_for(os.environ) is not None or os.environ.get(ASK_YOURSELF_ENV):
        return None
    lock = _ask_lock(record_path())
    deadline = time.monotonic() + wait_s
    while True:
        answers = read_record()
        if answers is not None:
            _primed = True
            return answers
        if not _younger(lock, wait_s) or time.monotonic() > deadline:
            answers = read_record()  # the ask may have kept them just now
            if answers is None:
                log.warning("vector_isa_ask_not_kept", waited_s=wait_s)
            return answers
        time.sleep(poll_s)


def record_here() -> list[Answer]:
    """Let Inductor ask in this (fresh) process and keep each compile-and-load answer."""
    from torch._inductor.cpu_vec_isa import pick_vec_isa

    answers: list[Answer] = []
    with _probes_answered_by(_recorder(answers)):
        pick_vec_isa()
    write_record(answers)  # even none: no later process starts another ask
    return answers


_ASKED: set[Path] = set()
_PRIVATE_ENV = "KERNELOPT_VECTOR_ISA_PRIVATE"
_LOCK_ENV = "KERNELOPT_VECTOR_ISA_LOCK"
ASK_STALE_S = 900.0  # an ask's lock older than this is taken over (its process died)
# The ask runs in no sandbox, so it shares nothing candidates can write: its working
# directory and both compiler caches are a private folder (the probe would load a probe
# library it found in the shared Inductor cache instead of building it), removed after.
_ASK = """
import os, shutil
from pathlib import Path
private = os.environ["KERNELOPT_VECTOR_ISA_PRIVATE"]
try:
    from kernelopt.compile.vector_isa import record_here
    record_here()
finally:
    shutil.rmtree(private, ignore_errors=True)
    Path(os.environ["KERNELOPT_VECTOR_ISA_LOCK"]).unlink(missing_ok=True)
"""


def _younger(lock: Path, seconds: float) -> bool:
    """Is there an ask's lock, taken less than ``seconds`` ago?"""
    try:
        return time.time() - lock.stat().st_mtime < seconds
    except OSError:
        return False


def _ask_lock(record: Path) -> Path:
    """The lock an ask for ``record`` holds while it runs."""
    return record.with_name(f".{record.stem}.asking")


def _take_ask_lock(record: Path) -> Path | None:
    """One ask per key on a machine at a time (workers and their children all ask):
    the lock beside the record, or None if a live ask holds it."""
    lock = _ask_lock(record)
    with contextlib.suppress(OSError):
        if time.time() - lock.stat().st_mtime > ASK_STALE_S:
            lock.unlink(missing_ok=True)
    try:
        record.parent.mkdir(parents=True, exist_ok=True)
        os.close(os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
    except OSError:
        return None
    return lock


def keep_for(env: Mapping[str, str]) -> subprocess.Popen[bytes] | None:
    """Have the answers for the compiler ``env`` names kept, if none are: a detached
    process with that environment asks Inductor once (no sandbox, so the folder is
    writable to it; it runs nothing but Inductor's probe). Trusted processes that need
    the answers meanwhile wait for it (``await_kept``); sandboxed ones ask themselves.
    The process, or None."""
    record = record_path(env)
    if record in _ASKED or record.exists():
        return None
    _ASKED.add(record)
    lock = _take_ask_lock(record)
    if lock is None:
        return None
    private = tempfile.mkdtemp(prefix="kernelopt-vector-isa-")
    child = {
        **env,
        RECORD_ENV: str(record_dir(env)),
        _PRIVATE_ENV: private,  # the ask removes it and the lock when done
        _LOCK_ENV: str(lock),
        "TORCHINDUCTOR_CACHE_DIR": os.path.join(private, "inductor"),
        "TRITON_CACHE_DIR": os.path.join(private, "triton"),
    }
    try:
        return subprocess.Popen(
            [sys.executable, "-s", "-c", _ASK],
            env=child,
            cwd=private,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,  # outlives a short-lived parent and its group
        )
    except OSError as exc:
        log.warning("vector_isa_ask_failed", error=f"{type(exc).__name__}: {exc}")
        shutil.rmtree(private, ignore_errors=True)
        lock.unlink(missing_ok=True)
        return None


def keep_for_children(env: Mapping[str, str]) -> subprocess.Popen[bytes] | None:
    """``keep_for`` a sandboxed child's ``env`` (it may compile with another compiler
    than its parent), once this machine has seen a wrapper with C++ kernels (its own
    answers are kept): a machine that never compiles C++ never asks."""
    if not record_path().exists():
        return None
    return keep_for(env)


__all__ = [
    "ASK_YOURSELF_ENV",
    "RECORD_ENV",
    "answer_probes",
    "await_kept",
    "has_cpp_kernels",
    "keep_for",
    "keep_for_children",
    "key_parts",
    "machine_key",
    "prime",
    "primed",
    "read_record",
    "record_dir",
    "record_here",
    "record_path",
    "replay_kept",
    "write_record",
]
