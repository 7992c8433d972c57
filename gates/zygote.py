"""A pre-forked launcher: import torch once, fork a fresh process per gate job.

Importing torch and Triton costs seconds per process and a verdict starts
several processes (reference, candidate, 2 x rounds timings).  The zygote is a
process that imports them once -- and never initialises CUDA -- then forks one
child per job.  Each child is still a fresh process for everything that
matters: its own CUDA context, allocator, compiled-kernel state and module
globals (a candidate's monkey-patching dies with it).

Protocol (text lines): the parent writes ``run TOKEN WORKDIR``; the zygote
answers ``started TOKEN PID`` and, when the child ends, ``exited PID CODE``
(``CODE`` as ``subprocess`` reports it: negative for a signal).  ``kill PID``
kills a child's process group and tree: PIDs are the zygote's own (in the
sandbox they live in its PID namespace, so the parent must never signal them
itself).  For a turn session (``gates.turns``) ``stop PID`` SIGSTOPs a child
and every descendant (``gates.proctree``'s walk, so a helper that left the
process group is caught), and every orphan the zygote adopted, which no
``cont`` ever resumes; ``cont PID`` resumes what the last stop stopped (``cont
PID all``: the whole tree, to finish alone); ``pin PID CPU`` pins the tree's
threads.  Each is answered (``stopped PID``, ``continued PID``, ``pinned
PID``) once done, so the parent knows a side is stopped before the other's
turn starts; ``refused WORD PID`` when PID is not a child of this zygote.

Sandboxed (the default, ``gates.sandbox``), the zygote runs under bubblewrap
with no network, an allow-listed environment and a view of the system, the
project, the compiler caches and one staging root; each job is staged into
that root (``gates.sandbox_stage``) and every forked child sets its own
resource limits before it reads its job.  The children share the zygote's
``/tmp``, so each makes its stage's scratch directory its ``HOME`` and
``TMPDIR``, and Inductor's precompiled C++ headers live in the guarded
compiler cache (``_headers_in_guarded_cache``): where tools keep state
between runs, no job finds what an earlier one left.  Children call
``setsid`` so a timeout kills the child's whole process group, and they write
nothing to the protocol pipe (stdout/stderr go to ``WORKDIR/child.log``).
The zygote itself is single-threaded (fork and threads do not mix).
"""

from __future__ import annotations

import contextlib
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

from gates import proctree, sandbox
from gates.child import main as child_main
from gates.sandbox_stage import Stage, new_root, scratch_of

PRELOAD = (
    "torch",
    "torch.utils._pytree",
    "torch.utils._python_dispatch",
    "torch.utils.flop_counter",
    "triton",
    "triton.language",
    "triton.testing",
    "pydantic",
    "kernelopt.kinds.registry",
    "gates.child",
    "gates.jobs.reference",
    "gates.jobs.candidate",
    "gates.jobs.timing",
    "gates.jobs.turn_side",
    "gates.jobs.screen",
)
# Seconds each for a compiled baseline; imported without initialising CUDA.
OPTIONAL_PRELOAD = ("torch._dynamo", "torch._inductor.compile_fx")
ACK_TIMEOUT_S = 10.0  # a stop, cont or pin unanswered this long fails the turn session
_ACKS = ("stopped", "continued", "pinned", "refused")
# exited children remembered, so a stop or cont racing a child's exit is no error: that
# command comes right after the child's end, so the newest few thousand are plenty
_GONE_KEPT = 4096


# --------------------------------------------------------------------------- zygote side


def _child(workdir: str) -> None:
    """In the forked child: new session, logs to the workdir, run the job, never return."""
    try:
        os.setsid()
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        fd = os.open(os.path.join(workdir, "child.log"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        os.close(fd)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)
        os.chdir(workdir)
        _private_scratch(Path(workdir))
        child_main([workdir])  # calls os._exit
    finally:
        os._exit(70)


def _private_scratch(workdir: Path) -> None:
    """``HOME`` and ``TMPDIR`` of the job's own: its stage's scratch directory.

    Tools keep state under them between runs (a user site's ``.pth`` files, CUDA's
    JIT cache, our own code directory, temporary files), and in the zygote's ``/tmp``
    a file one job left there would be read by the next.  Unsandboxed, there is no
    stage and the child keeps the parent's.
    """
    scratch = scratch_of(workdir)
    if scratch.is_dir():
        os.environ["HOME"] = os.environ["TMPDIR"] = str(scratch)
        tempfile.tempdir = None  # gettempdir() asks the environment again


def _headers_in_guarded_cache() -> None:
    """Inductor's precompiled C++ headers in its cache directory, not in ``/tmp``.

    Inductor fixes their folder at import, under the temp directory: in the sandbox
    that is the ``/tmp`` every child of this zygote shares, where no cache guard looks,
    and a header one job rewrote would be compiled into a later job's kernels.  In the
    compiler cache the guard drops a rewritten one (``gates.cache_guard``), and the
    children of every zygote on that cache build each header once.
    """
    codecache = sys.modules.get("torch._inductor.codecache")
    if codecache is None or not hasattr(codecache, "_HEADER_DIR"):
        return
    try:
        from torch._inductor.runtime.cache_dir_utils import cache_dir
    except ImportError:
        return
    codecache._HEADER_DIR = os.path.join(cache_dir(), "precompiled_headers")
    codecache._HEADER_LOCK_DIR = os.path.join(codecache._HEADER_DIR, "locks")


def _forked_cuda_works() -> bool:
    """On a CUDA zygote, prove once that a forked child can still use the GPU.

    ``torch.cuda.is_initialized()`` misses a bare ``cuInit`` (e.g. a device
    count taken during an import), after which forked children cannot use
    CUDA at all; a test fork is the only reliable check.
    """
    if os.environ.get("KERNELOPT_ZYGOTE_CUDA") != "1":
        return True
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            import torch

            torch.zeros(1, device="cuda").add_(1)
            torch.cuda.synchronize()
            code = 0
        finally:
            os._exit(code)
    deadline = time.monotonic() + 60.0
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status) == 0
        time.sleep(0.05)
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    return False  # a forked child hung initialising CUDA


def _answer_vector_isa_probe(cuda: bool) -> None:
    """Answer Inductor's CPU vector-instruction probe here, once, for every child.

    Each process that loads a wrapper with C++ kernels asks otherwise, with a
    compile-and-load probe per instruction set in subprocesses; Inductor keeps the
    answer in its module, so the children forked from here inherit it. The machine's
    kept answers are replayed (``kernelopt.compile.vector_isa``); without them a CPU
    zygote (whose wrappers are all C++) has the machine's one ask answer it, and a CUDA
    one leaves the rare child that needs them to replay or ask.
    """
    with contextlib.suppress(Exception):
        from kernelopt.compile import vector_isa

        if not vector_isa.replay_kept() and not cuda:
            from torch._inductor.cpu_vec_isa import pick_vec_isa

            vector_isa.answer_probes()
            pick_vec_isa()


def serve() -> None:
    """The zygote's loop: preload, announce readiness, fork on request, report exits."""
    import importlib

    sandbox.not_inspectable()  # every trusted child is forked from here: no child may attach to it

    for name in PRELOAD:
        importlib.import_module(name)
    for name in OPTIONAL_PRELOAD:
        with contextlib.suppress(Exception):
            importlib.import_module(name)
    _answer_vector_isa_probe(cuda=os.environ.get("KERNELOPT_ZYGOTE_CUDA") == "1")
    _headers_in_guarded_cache()
    out = sys.stdout
    import torch

    if torch.cuda.is_initialized() or not _forked_cuda_works():
        out.write("tainted\n")  # a fork would inherit a driver state it cannot use
        out.flush()
        return
    from gates.reaper import become_subreaper, reap_orphans

    become_subreaper()  # a job's escaped daemons become ours, and are killed
    out.write("ready\n")
    out.flush()
    children: set[int] = set()
    stopped: dict[int, list[int]] = {}  # child -> its tree as last stopped
    buffer = b""
    stdin = sys.stdin.fileno()
    while True:
        readable, _, _ = select.select([stdin], [], [], 0.05)
        if readable:
            chunk = os.read(stdin, 65536)
            if not chunk:
                break
            buffer += chunk
            while b"\n" in buffer:
                line, buffer = buffer.split(b"\n", 1)
                parts = line.decode().split(" ", 2)
                if parts[0] in _TREE_COMMANDS:
                    answer = _tree_command(parts, children, stopped)
                    if answer:
                        out.write(answer + "\n")
                        out.flush()
                if len(parts) == 3 and parts[0] == "run":
                    pid = os.fork()
                    if pid == 0:
                        _child(parts[2])
                    children.add(pid)
                    out.write(f"started {parts[1]} {pid}\n")
                    out.flush()
        while children:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            if pid not in children:
                continue  # an adopted orphan that died by itself
            children.discard(pid)
            stopped.pop(pid, None)
            reap_orphans(keep=children)  # before anyone hears the job ended
            out.write(f"exited {pid} {os.waitstatus_to_exitcode(status)}\n")
            out.flush()
    for pid in children:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGKILL)


_TREE_COMMANDS = {"kill": "", "stop": "stopped", "cont": "continued", "pin": "pinned"}


def _tree_command(parts: list[str], children: set[int], stopped: dict[int, list[int]]) -> str:
    """``kill``, ``stop``, ``cont`` or ``pin`` on a child's tree; the answer line ("" for kill).

    Runs in the zygote: it alone can name a sandboxed child's PIDs.  Orphans it
    adopted are stopped with any child and resumed with none: a helper that
    escaped its child's tree (``clone(CLONE_PARENT)``, or one orphaned after the
    child dropped its own subreaper flag) cannot be told apart, so it never runs
    during a turn.
    """
    word = parts[0]
    pid = int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else -1
    if pid not in children:
        return "" if word == "kill" else f"refused {word} {parts[1] if len(parts) > 1 else ''}"
    if word == "kill":
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGKILL)
        proctree.send(proctree.tree(pid), signal.SIGKILL)
    elif word == "stop":
        escaped = tuple(proctree.strays(os.getpid(), children))
        stopped[pid] = proctree.stop_tree(pid, stopped.get(pid) or [pid], also=escaped)
    elif word == "cont":
        whole = len(parts) > 2 and parts[2] == "all"
        pids = proctree.tree(pid) if whole else stopped.get(pid) or [pid]
        proctree.send(pids, signal.SIGCONT)
    elif word == "pin":
        if len(parts) < 3 or not parts[2].isdigit():
            return f"refused {word} {pid}"
        proctree.pin(stopped.get(pid) or proctree.tree(pid), int(parts[2]))
    return f"{_TREE_COMMANDS[word]} {pid}" if _TREE_COMMANDS[word] else ""


# --------------------------------------------------------------------------- parent side


class ZygoteError(RuntimeError):
    """The zygote could not start or stopped answering (fall back to plain spawns)."""


class Zygote:
    """Parent-side handle: thread-safe ``spawn`` / ``wait`` / ``kill``."""

    def __init__(self, env: dict[str, str], start_timeout_s: float = 180.0) -> None:
        # -P: the working directory (a writable stage) is not an import path, or a child
        # could plant a module there for a later, trusted child to import
        argv = [sys.executable, "-P", "-m", "gates.zygote"]
        self._stage_root: Path | None = None
        self._stages: dict[int, Stage] = {}
        if sandbox.enabled():
            binary = sandbox.require()
            self._stage_root = new_root()
            limits = sandbox.SandboxLimits.from_env()
            argv = [
                *sandbox.bwrap_args(
                    binary,
                    ro=[self._stage_root / "ro"],
                    rw=[self._stage_root / "rw"],
                    chdir=self._stage_root / "rw",
                    tmp_bytes=limits.tmp_bytes,
                ),
                *argv,
            ]
        else:
            sandbox.warn_unsandboxed("zygote")
        self._proc = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
            start_new_session=True,
        )
        self._lock = threading.Lock()
        self._cond = threading.Condition()
        self._started: dict[str, int] = {}
        self._exited: dict[int, int] = {}
        # children that exited, whether or not waited for (oldest first, the newest kept)
        self._gone: dict[int, None] = {}
        self._acks: dict[str, int] = {}  # answer line -> how many are unclaimed
        self._ready = threading.Event()
        self._dead = False
        self._next = 0
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        if not self._ready.wait(start_timeout_s):
            self.close()
            raise ZygoteError(f"zygote not ready within {start_timeout_s:g} s")
        if self._dead:
            self.close()
            raise ZygoteError("zygote exited during start-up (or CUDA was initialised in it)")

    def _read(self) -> None:
        assert_stdout = self._proc.stdout
        if assert_stdout is None:
            return
        for raw in assert_stdout:
            parts = raw.decode(errors="replace").split()
            with self._cond:
                if parts == ["ready"]:
                    self._ready.set()
                elif parts == ["tainted"]:
                    self._dead = True
                    self._ready.set()
                elif len(parts) == 3 and parts[0] == "started":
                    self._started[parts[1]] = int(parts[2])
                    self._gone.pop(int(parts[2]), None)  # a reused PID is a live child again
                elif len(parts) == 3 and parts[0] == "exited":
                    self._exited[int(parts[1])] = int(parts[2])
                    self._gone[int(parts[1])] = None
                    while len(self._gone) > _GONE_KEPT:  # a command follows its child's end
                        del self._gone[next(iter(self._gone))]
                elif len(parts) in (2, 3) and parts[0] in _ACKS:
                    key = " ".join(parts)
                    self._acks[key] = self._acks.get(key, 0) + 1
                self._cond.notify_all()
        with self._cond:
            self._dead = True
            self._ready.set()
            self._cond.notify_all()

    @property
    def alive(self) -> bool:
        return not self._dead and self._proc.poll() is None

    @property
    def sandboxed(self) -> bool:
        return self._stage_root is not None

    def spawn(self, workdir: Path, timeout_s: float = 30.0) -> int:
        stage = Stage(self._stage_root, Path(workdir)) if self._stage_root else None
        if stage is not None:
            workdir = stage.enter()
        try:
            pid = self._spawn(workdir, timeout_s)
        except BaseException:
            if stage is not None:
                stage.leave()
            raise
        if stage is not None:
            with self._cond:
                self._stages[pid] = stage
        return pid

    def _spawn(self, workdir: Path, timeout_s: float) -> int:
        with self._lock:
            self._next += 1
            token = str(self._next)
            stdin = self._proc.stdin
            if stdin is None or not self.alive:
                raise ZygoteError("zygote is not running")
            stdin.write(f"run {token} {workdir}\n".encode())
            stdin.flush()
        with self._cond:
            if not self._cond.wait_for(lambda: token in self._started or self._dead, timeout_s):
                raise ZygoteError("zygote did not fork in time")
            if token not in self._started:
                raise ZygoteError("zygote died")
            return self._started.pop(token)

    def workdir_of(self, pid: int, workdir: Path) -> Path:
        """Where child ``pid`` (started on ``workdir``) writes while it runs: its stage."""
        with self._cond:
            stage = self._stages.get(pid)
        return stage.work if stage is not None else Path(workdir)

    def wait(self, pid: int, timeout_s: float) -> int | None:
        """The child's exit code, or None if it is still running after ``timeout_s``."""
        with self._cond:
            self._cond.wait_for(lambda: pid in self._exited or self._dead, timeout_s)
            if pid in self._exited:
                code: int | None = self._exited.pop(pid)
            elif self._dead:
                code = -int(signal.SIGKILL)
            else:
                return None
            stage = self._stages.pop(pid, None)
        if stage is not None:
            stage.leave()  # the child is gone: what it wrote goes back to the host paths
        return code

    def kill(self, pid: int) -> None:
        """SIGKILL the child's process group and tree (through the zygote when it is sandboxed)."""
        if not self.sandboxed:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signal.SIGKILL)
            proctree.send(proctree.tree(pid), signal.SIGKILL)
            return
        with self._lock, contextlib.suppress(OSError, ValueError):
            stdin = self._proc.stdin
            if stdin is not None and self.alive:
                stdin.write(f"kill {pid}\n".encode())
                stdin.flush()

    def stop(self, pid: int, timeout_s: float = ACK_TIMEOUT_S) -> None:
        """SIGSTOP child ``pid``'s whole tree (and every stray orphan), in the zygote; returns
        once it is done.  ``ZygoteError`` if no acknowledgement comes within ``timeout_s``."""
        self._command(f"stop {pid}", f"stopped {pid}", timeout_s)

    def cont(self, pid: int, timeout_s: float = ACK_TIMEOUT_S, *, whole: bool = False) -> None:
        """SIGCONT what the last ``stop`` of ``pid`` stopped (``whole``: its whole tree)."""
        self._command(f"cont {pid}{' all' if whole else ''}", f"continued {pid}", timeout_s)

    def pin(self, pid: int, cpu: int, timeout_s: float = ACK_TIMEOUT_S) -> None:
        """Every thread of child ``pid``'s tree onto ``cpu``."""
        self._command(f"pin {pid} {cpu}", f"pinned {pid}", timeout_s)

    def _command(self, line: str, ack: str, timeout_s: float) -> None:
        """Send a tree command and wait for its answer.  A refusal for a child that has
        exited is no error: nothing of its tree is left to stop, continue or pin (a child that
        answered its last command can exit while the stop after it is on its way)."""
        word, pid = line.split()[:2]
        refused = f"refused {word} {pid}"
        with self._lock:
            stdin = self._proc.stdin
            if stdin is None or not self.alive:
                raise ZygoteError(f"zygote is not running ({line!r} not sent)")
            try:
                stdin.write(f"{line}\n".encode())
                stdin.flush()
            except (OSError, ValueError) as exc:
                raise ZygoteError(f"zygote did not take {line!r}: {exc}") from exc
        with self._cond:
            got = self._cond.wait_for(
                lambda: self._acks.get(ack) or self._acks.get(refused) or self._dead, timeout_s
            )
            for key in (ack, refused):
                if self._acks.get(key):
                    self._acks[key] -= 1
                    if key == refused and int(pid) not in self._gone:
                        raise ZygoteError(f"zygote refused {line!r}: not its child")
                    return
        raise ZygoteError(
            f"zygote gave no {ack.split()[0]!r} within {timeout_s:g} s"
            if not got
            else f"zygote died before answering {line!r}"
        )

    def signaller(self, pid: int) -> ZygoteTree:
        """The turn-session handle on child ``pid``'s tree (``gates.proctree.TreeSignaller``)."""
        return ZygoteTree(self, pid)

    def close(self) -> None:
        with contextlib.suppress(Exception):
            if self._proc.stdin:
                self._proc.stdin.close()
        try:
            self._proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self._proc.pid, signal.SIGKILL)
            self._proc.wait()
        if self._stage_root is not None:
            for stage in self._stages.values():
                stage.leave()
            self._stages.clear()
            shutil.rmtree(self._stage_root, ignore_errors=True)


@contextlib.contextmanager
def _failed() -> Iterator[None]:
    try:
        yield
    except ZygoteError as exc:
        raise proctree.SignalFailed(str(exc)) from exc


class ZygoteTree:
    """A forked child's tree, signalled through its zygote (which alone can name its PIDs)."""

    def __init__(self, zygote: Zygote, pid: int) -> None:
        self.zygote = zygote
        self.pid = pid

    def stop(self) -> int:
        with _failed():
            self.zygote.stop(self.pid)
        return time.perf_counter_ns()

    def cont(self) -> None:
        with _failed():
            self.zygote.cont(self.pid)

    def release(self) -> None:
        with _failed():
            self.zygote.cont(self.pid, whole=True)

    def pin(self, cpu: int) -> None:
        with _failed():
            self.zygote.pin(self.pid, cpu)

    def kill(self) -> None:
        self.zygote.kill(self.pid)


if __name__ == "__main__":
    serve()
