"""A bubblewrap sandbox around every process that imports candidate code.

Candidate kernels are arbitrary Python written by an LLM.  A gate child runs
inside ``bwrap`` (Debian ``bubblewrap``; found on PATH or through
``KERNELOPT_BWRAP``) with:

* its own user, PID, network, IPC and UTS namespaces: no network at all (the
  loopback of the sandbox is its own, so the Temporal frontend on the host's
  127.0.0.1 is unreachable), no signals to host processes, and every process
  it leaves behind dies with the sandbox;
* a filesystem view built from nothing: the interpreter, site-packages and
  the project read-only, ``/dev`` with the GPU device nodes, ``/sys``
  read-only, a private size-limited ``/tmp``, the compiler caches writable
  (guarded by ``gates.cache_guard``), and only the paths its own job names
  (the job's workdir and outputs writable, its inputs read-only).  No home
  directory, no ``$KERNELOPT_HOME``, no ``/etc/passwd``, no artifact store
  beyond the blobs its own wrapper needs;
* an environment built from an allow-list (no LLM key, no ``KERNELOPT_*``
  secrets, no Temporal address);
* resource limits (``SandboxLimits``), set by the child itself before the job
  is read (``apply_limits``), hard and soft alike so the candidate cannot
  raise them;
* never host root: Linux exempts uid 0 from ``RLIMIT_NPROC`` even inside a user
  namespace, so a root parent runs bwrap without a user namespace and the child
  under ``setpriv`` as an unprivileged uid of its own (``root_drop_args``).

``KERNELOPT_SANDBOX=off`` runs children unsandboxed; it is an explicit opt-out
that logs a warning on every launch.  With the sandbox on and no working
bubblewrap, launching raises ``SandboxUnavailable``: never a silent fallback.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import itertools
import json
import os
import re
import resource
import shutil
import subprocess
import sys
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from kernelopt.compile import vector_isa
from kernelopt.errors import InfrastructureError
from kernelopt.log import get_logger

_LOG = get_logger(__name__)

REPO_ROOT = Path(__file__).resolve().parent.parent
SANDBOX_ENV = "KERNELOPT_SANDBOX"
BWRAP_ENV = "KERNELOPT_BWRAP"
SANDBOX_UID_ENV = "KERNELOPT_SANDBOX_UID"  # first uid a root parent's sandboxes run as
_UID_SPAN = 50_000
# What the unprivileged child keeps of root: reading and writing the files of its view
# whatever their owner (the view is read-only where it must be); never CAP_SYS_ADMIN or
# CAP_SYS_RESOURCE, which would lift RLIMIT_NPROC again.
_KEPT_CAPS = ("dac_override", "dac_read_search")
LIMITS_FILE = "sandbox.json"

# Variables a gate child may see (besides those the runner sets itself).  Anything
# else -- OPENAI_API_KEY, KERNELOPT_API_KEY, KERNELOPT_TEMPORAL_ADDRESS, ... -- stays out.
ALLOWED_ENV = frozenset(
    {
        "LANG",
        "LC_ALL",
        "TZ",
        "OMP_NUM_THREADS",
        "MKL_NUM_THREADS",
        "CUDA_VISIBLE_DEVICES",
        "CUDA_DEVICE_ORDER",
        "CUDA_HOME",
        "CUDA_PATH",
        "CUDA_MODULE_LOADING",
        "CUDA_LAUNCH_BLOCKING",
        "NVIDIA_VISIBLE_DEVICES",
        "NVIDIA_DRIVER_CAPABILITIES",
        "LD_LIBRARY_PATH",
        "TRITON_INTERPRET",
        "TRITON_PTXAS_PATH",
        "TRITON_LIBCUDA_PATH",
        "TORCHINDUCTOR_COMPILE_THREADS",
        "TORCHINDUCTOR_MAX_AUTOTUNE",
        "PYTORCH_NVML_BASED_CUDA_CHECK",
        "PYTORCH_CUDA_ALLOC_CONF",
        "KERNELOPT_GATES_SMALL",  # test problems' small sizes
        "KERNELOPT_SANDBOX",
        "KERNELOPT_HELION_EFFORT",
        "HELION_AUTOTUNE_EFFORT",
    }
)
# where a sandboxed process finds the machine's vector-ISA answers (kernelopt.compile.vector_isa)
VECTOR_ISA_VIEW = "/run/kernelopt/vector-isa"
_SECRET_HINT = re.compile(r"KEY|TOKEN|SECRET|PASSWORD|CREDENTIAL", re.IGNORECASE)


class SandboxUnavailable(InfrastructureError):
    """The sandbox is on but bubblewrap is missing or cannot create namespaces here."""


def enabled() -> bool:
    """True unless ``KERNELOPT_SANDBOX`` is set to an explicit off value."""
    value = os.environ.get(SANDBOX_ENV, "on").strip().lower()
    return value not in ("off", "0", "false", "no", "f", "n")


def warn_unsandboxed(what: str) -> None:
    """Say loudly that candidate code runs with the user's full rights."""
    _LOG.warning(
        "candidate code runs UNSANDBOXED (KERNELOPT_SANDBOX=off): it can read every "
        "file and secret of this user and reach the network",
        launch=what,
    )


def bwrap_path() -> str:
    """The bubblewrap binary: ``$KERNELOPT_BWRAP``, else ``bwrap`` on PATH."""
    configured = os.environ.get(BWRAP_ENV)
    if configured:
        if not (os.path.isfile(configured) and os.access(configured, os.X_OK)):
            raise SandboxUnavailable(f"{BWRAP_ENV}={configured} is not an executable file")
        return configured
    found = shutil.which("bwrap")
    if not found:
        raise SandboxUnavailable(
            "bubblewrap (`bwrap`) is not installed: install it (Debian: apt-get install "
            f"bubblewrap) or point {BWRAP_ENV} at it; KERNELOPT_SANDBOX=off runs candidate "
            "code unsandboxed (not for shared hosts)"
        )
    return found


@functools.lru_cache(maxsize=4)
def _probe(binary: str) -> str:
    """Empty when ``binary`` can create the namespaces we use, else why not."""
    try:
        done = subprocess.run(
            [binary, "--unshare-all", "--ro-bind", "/", "/", "--proc", "/proc", "true"],
            capture_output=True,
            text=True,
            timeout=20,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return str(exc)
    return "" if done.returncode == 0 else (done.stderr.strip() or f"exit {done.returncode}")


def require() -> str:
    """The bwrap binary, proven to work here; raises ``SandboxUnavailable`` otherwise."""
    binary = bwrap_path()
    if _root_mode(binary):
        return binary
    reason = _probe(binary)
    if reason:
        raise SandboxUnavailable(
            f"bubblewrap cannot create a sandbox here ({reason}); user namespaces may be "
            "disabled (sysctl kernel.unprivileged_userns_clone / user.max_user_namespaces). "
            "KERNELOPT_SANDBOX=off runs candidate code unsandboxed (not for shared hosts)"
        )
    return binary


# --------------------------------------------------------------------------- root


def _root_namespaces() -> list[str]:
    """``--unshare-all`` less the user namespace: a root parent maps no uids."""
    return [
        "--unshare-pid",
        "--unshare-net",
        "--unshare-ipc",
        "--unshare-uts",
        "--unshare-cgroup-try",
    ]


_UIDS = itertools.count()


def sandbox_uid() -> int:
    """A fresh unprivileged uid per sandbox: RLIMIT_NPROC counts per uid, so sandboxes
    that share one would share one process budget (and one fork bomb would starve all)."""
    base = _env_int(SANDBOX_UID_ENV, 1_500_000)
    return base + (os.getpid() * 7919 + next(_UIDS)) % _UID_SPAN


def root_drop_args(uid: int) -> list[str]:
    """``setpriv`` between bwrap and the child: real, effective and saved uid ``uid``, no
    groups, only ``_KEPT_CAPS`` (ambient, so they survive the exec), no new privileges
    (a setuid binary in the view cannot make it root again)."""
    caps = ",".join(f"+{c}" for c in _KEPT_CAPS)
    return [
        shutil.which("setpriv") or "setpriv",
        f"--reuid={uid}",
        f"--regid={uid}",
        "--clear-groups",
        f"--inh-caps=-all,{caps}",
        f"--ambient-caps=-all,{caps}",
        f"--bounding-set=-all,{caps}",
        "--no-new-privs",
        "--",
    ]


def _root_caps() -> list[str]:
    """What bwrap hands to setpriv: the kept caps and what setpriv needs to switch uid."""
    caps = [*_KEPT_CAPS, "setuid", "setgid", "setpcap"]
    args = ["--cap-drop", "ALL"]
    for cap in caps:
        args += ["--cap-add", f"CAP_{cap.upper()}"]
    return args


@functools.lru_cache(maxsize=4)
def _root_mode(binary: str) -> bool:
    """True when this is a root parent and bwrap can drop its child to another uid here.

    Root without CAP_SYS_ADMIN (a default Docker container) cannot create the namespaces
    without a user namespace: then the sandbox keeps the user namespace, uid 0 inside,
    and warns that RLIMIT_NPROC does not hold (docs/security.md).
    """
    if os.geteuid() != 0:
        return False
    if shutil.which("setpriv") is None:
        _LOG.warning("sandbox as root without setpriv (util-linux): RLIMIT_NPROC does not hold")
        return False
    argv = [
        binary,
        *_root_namespaces(),
        *_root_caps(),
        "--ro-bind",
        "/",
        "/",
        "--proc",
        "/proc",
        "--",
        *root_drop_args(sandbox_uid()),
        "true",
    ]
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=20, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        reason = str(exc)
    else:
        if done.returncode == 0:
            return True
        reason = done.stderr.strip() or f"exit {done.returncode}"
    _LOG.warning(
        "sandbox as root keeps uid 0 in a user namespace: RLIMIT_NPROC does not hold "
        "(run workers as a non-root user, or grant CAP_SYS_ADMIN)",
        reason=reason[:300],
    )
    return False


# --------------------------------------------------------------------------- limits


def _env_int(name: str, default: int) -> int:
    value = os.environ.get(name, "")
    try:
        return int(value) if value else default
    except ValueError:
        return default


def _mem_total() -> int:
    with contextlib.suppress(OSError, ValueError, IndexError):
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) * 1024
    return 16 * 2**30


@dataclass(frozen=True)
class SandboxLimits:
    """Per-process rlimits of a gate child (bytes, counts, seconds).

    ``nproc`` counts processes *and threads* of the sandbox's user (its user
    namespace has its own count); ``data_bytes`` caps private writable memory
    (``RLIMIT_AS`` would also count CUDA's huge virtual reservations).
    """

    data_bytes: int
    nproc: int
    nofile: int
    fsize_bytes: int
    cpu_s: int
    tmp_bytes: int = 1 << 30

    @classmethod
    def from_env(cls, timeout_s: float = 600.0) -> SandboxLimits:
        """Defaults scaled to the host, overridable per variable (``KERNELOPT_SANDBOX_*``)."""
        mib = 2**20
        return cls(
            data_bytes=_env_int("KERNELOPT_SANDBOX_MEM_MB", _mem_total() // 2 // mib) * mib,
            nproc=_env_int("KERNELOPT_SANDBOX_NPROC", 4096),
            nofile=_env_int("KERNELOPT_SANDBOX_NOFILE", 4096),
            fsize_bytes=_env_int("KERNELOPT_SANDBOX_FSIZE_MB", 4096) * mib,
            # CPU seconds across all threads: generous against wall time, a stop for spinners.
            cpu_s=_env_int("KERNELOPT_SANDBOX_CPU_S", int(max(600.0, 8 * timeout_s))),
            tmp_bytes=_env_int("KERNELOPT_SANDBOX_TMP_MB", 1024) * mib,
        )


def write_limits(workdir: Path, limits: SandboxLimits) -> None:
    """Leave the limits for the child in its workdir (read before any job code runs)."""
    (Path(workdir) / LIMITS_FILE).write_text(json.dumps(asdict(limits)))


_PR_SET_DUMPABLE = 4


def not_inspectable() -> None:
    """In the child, before any job code: no other process of its uid may ptrace it or open
    its memory, environment or descriptors under /proc.

    Children forked from one sandboxed zygote share a uid and a PID namespace, and
    some run side by side (a prestarted timing child beside the candidate's gates
    1-3 child); a candidate could otherwise attach to a trusted sibling and change
    what it computes or times.  A candidate can make itself inspectable again, but
    never another child.  Linux; elsewhere a no-op.
    """
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0)


def apply_limits(workdir: Path) -> SandboxLimits | None:
    """In the child: set the limits found in ``workdir`` (soft = hard: no raising them)."""
    path = Path(workdir) / LIMITS_FILE
    if not path.is_file():
        return None
    limits = SandboxLimits(**json.loads(path.read_text()))
    pairs = (
        (resource.RLIMIT_DATA, limits.data_bytes),
        (resource.RLIMIT_NPROC, limits.nproc),
        (resource.RLIMIT_NOFILE, limits.nofile),
        (resource.RLIMIT_FSIZE, limits.fsize_bytes),
        (resource.RLIMIT_CPU, limits.cpu_s),
    )
    for which, value in pairs:
        _soft, hard = resource.getrlimit(which)
        if hard != resource.RLIM_INFINITY:
            value = min(value, hard)
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(which, (value, value))
    return limits


# --------------------------------------------------------------------------- environment


def sandbox_env(base: Mapping[str, str], extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The allow-listed part of ``base`` plus what every child needs; ``extra`` last.

    ``extra`` comes from our own callers, but a name that looks like a secret
    is still dropped (a key has no business in a gate child).
    """
    env = {k: v for k, v in base.items() if k in ALLOWED_ENV}
    env.update(
        {
            "PATH": "/usr/local/bin:/usr/bin:/bin",
            "PYTHONPATH": _pythonpath(),
            "PYTHONUNBUFFERED": "1",
            "PYTHONDONTWRITEBYTECODE": "1",
            "PYTHONNOUSERSITE": "1",  # HOME is writable: no .pth file there may run
            "TMPDIR": "/tmp",
            "HOME": "/tmp",  # the private tmpfs: no host home, and Path.home() still works
            "USER": "kernelopt",
            "LOGNAME": "kernelopt",
        }
    )
    # the C++ compiler by absolute path: called by bare name ("c++", as torch's extension
    # builder does) from a working directory other than /tmp, gcc in the sandbox places
    # itself relative to that directory and cannot find cc1plus
    compiler = shutil.which("c++", path=env["PATH"])
    if compiler:
        env["CXX"] = compiler
    triton, inductor = cache_dirs()
    env["TRITON_CACHE_DIR"] = str(triton)
    env["TORCHINDUCTOR_CACHE_DIR"] = str(inductor)
    # the machine's vector-instruction answers for the sandbox's compiler: asked for once
    # outside, seen inside read-only at a path of their own (bwrap_args), not in a home
    asking = vector_isa.keep_for_children(
        {**env, vector_isa.RECORD_ENV: str(vector_isa.record_dir())}
    )
    env[vector_isa.RECORD_ENV] = VECTOR_ISA_VIEW
    if asking is not None:  # started for this very child: it would wait the longest
        env[vector_isa.ASK_YOURSELF_ENV] = "1"
    for key, value in (extra or {}).items():
        if not _SECRET_HINT.search(key):
            env[key] = value
    return env


def cache_dirs() -> list[Path]:
    """The compiler caches children share (absolute, created): Triton, then Inductor."""
    from gates.cache_guard import compiler_cache_dirs

    out = []
    for directory in compiler_cache_dirs():
        directory = Path(os.path.abspath(directory))
        directory.mkdir(parents=True, exist_ok=True)
        out.append(directory)
    return out


# --------------------------------------------------------------------------- the view


_RW_FIELDS = {"out_dir", "refs_dir"}
_RO_FIELDS = {
    "problem_path",
    "candidate_path",
    "compiled_json",
    "wrapper_json",
    "inputs_dir",
    "weights_file",
}


@dataclass
class JobView:
    """Host paths one job may see: read-only ones, writable ones, artifact blobs."""

    ro: list[Path] = field(default_factory=list)
    rw: list[Path] = field(default_factory=list)
    blobs: list[Path] = field(default_factory=list)


def job_view(job: Mapping[str, Any], workdir: Path) -> JobView:
    """What the job names: its model files and inputs (read-only), outputs (writable).

    A reference job writes the inputs the candidate later reads, so its
    ``inputs_dir`` is writable.  Models nested in lists (a screen job's
    candidates) are visited too.  A wrapper model's ``store_root`` is never
    exposed whole: only the blobs its compiled/wrapper JSON reach (``store_blobs``).
    """
    view = JobView(rw=[Path(workdir)])
    writes_inputs = job.get("job") == "reference"
    store_root = ""
    json_files: list[Path] = []

    def visit(value: object) -> None:
        nonlocal store_root
        if isinstance(value, list):  # a screen job's candidates: every one is in the view
            for item in value:
                visit(item)
        elif isinstance(value, Mapping):
            for key, item in value.items():
                if isinstance(item, Mapping | list):
                    visit(item)
                elif not isinstance(item, str) or not item:
                    continue
                elif key == "store_root":
                    store_root = item
                elif key in _RW_FIELDS or (key == "inputs_dir" and writes_inputs):
                    view.rw.append(Path(item))
                elif key in _RO_FIELDS:
                    view.ro.append(Path(item))
                    if key in ("compiled_json", "wrapper_json"):
                        json_files.append(Path(item))

    visit(job)
    view.ro = list(dict.fromkeys(view.ro))  # one problem file named by many models: once
    if store_root:
        view.blobs = store_blobs(Path(store_root), json_files)
    return view


_SHA = re.compile(r"^[0-9a-f]{64}$")


def store_blobs(root: Path, json_files: Iterable[Path], limit: int = 10_000) -> list[Path]:
    """Blob files under ``root`` reachable from the ``sha256`` fields of ``json_files``.

    JSON blobs are followed too (a re-stitched wrapper names its kernels'
    sources), so the child sees exactly the artifacts of its own verdict.
    """
    seen: set[str] = set()
    todo: list[object] = []
    for path in json_files:
        with contextlib.suppress(OSError, ValueError):
            todo.append(json.loads(Path(path).read_text()))
    out: list[Path] = []
    while todo and len(seen) < limit:
        value = todo.pop()
        if isinstance(value, dict):
            digest = value.get("sha256")
            if isinstance(digest, str) and _SHA.match(digest) and digest not in seen:
                seen.add(digest)
                blob = root / digest[:2] / digest
                if blob.is_file():
                    out.append(blob)
                    if str(value.get("media_type", "")).endswith("json"):
                        with contextlib.suppress(OSError, ValueError):
                            todo.append(json.loads(blob.read_bytes()))
            todo.extend(v for v in value.values() if isinstance(v, dict | list))
        elif isinstance(value, list):
            todo.extend(v for v in value if isinstance(v, dict | list))
    return out


def _system_args() -> list[str]:
    """Read-only system paths, /dev with the GPU nodes, /proc, /sys (before /tmp's tmpfs)."""
    args: list[str] = []
    for top in ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"):
        if os.path.islink(top):
            args += ["--symlink", os.readlink(top), top]
        elif os.path.isdir(top):
            args += ["--ro-bind", top, top]
    for name in ("ld.so.cache", "ld.so.conf", "ld.so.conf.d", "alternatives", "localtime"):
        path = f"/etc/{name}"
        if os.path.exists(path):
            args += ["--ro-bind", path, path]
    args += ["--dev", "/dev", "--proc", "/proc"]
    for node in sorted(Path("/dev").glob("nvidia*")):
        args += ["--dev-bind", str(node), str(node)]
    for path in ("/dev/dri", "/sys"):
        if os.path.exists(path):
            args += ["--ro-bind" if path == "/sys" else "--dev-bind", path, path]
    return args


def python_paths() -> list[Path]:
    """Where this interpreter's code comes from: prefixes, site-packages, the project and the
    ``PYTHONPATH`` entries (read-only in the sandbox; the GPU host installs wheels there)."""
    import site

    dirs = {sys.prefix, sys.base_prefix, sys.exec_prefix, str(REPO_ROOT)}
    dirs.add(os.path.dirname(os.path.realpath(sys.executable)))
    dirs.update(os.path.realpath(p) for p in site.getsitepackages())
    user_site = site.getusersitepackages()
    if site.ENABLE_USER_SITE and user_site in sys.path:
        dirs.add(user_site)
    for variable in ("PYTHONPATH", "LD_LIBRARY_PATH"):
        dirs.update(os.environ.get(variable, "").split(os.pathsep))
    return [
        Path(p)
        for p in sorted(dirs)
        if p
        and os.path.isabs(p)
        and os.path.isdir(p)
        and not p.startswith(("/usr/", "/proc"))
        and not _too_broad(p)
    ]


def _too_broad(path: str) -> bool:
    """A directory holding private places (/, /tmp, a home, $KERNELOPT_HOME) is never bound."""
    import tempfile

    private = [tempfile.gettempdir(), os.path.expanduser("~"), os.environ.get("KERNELOPT_HOME", "")]
    real = os.path.realpath(path)
    return real == "/" or any(
        p and (real == os.path.realpath(p) or os.path.realpath(p).startswith(real + os.sep))
        for p in private
    )


def _pythonpath() -> str:
    """The child's PYTHONPATH: the project first, then the parent's own entries."""
    entries = [str(REPO_ROOT)]
    for entry in os.environ.get("PYTHONPATH", "").split(os.pathsep):
        if entry and os.path.isabs(entry) and entry not in entries:
            entries.append(entry)
    return os.pathsep.join(entries)


def bwrap_args(
    binary: str,
    *,
    ro: Iterable[Path] = (),
    rw: Iterable[Path] = (),
    chdir: Path | None = None,
    tmp_bytes: int = 1 << 30,
    shared_caches: bool = True,
) -> list[str]:
    """The bwrap command line (up to ``--``) for a view of ``ro`` and ``rw`` host paths.

    Paths keep their host names inside, so job files need no rewriting.  A
    writable path listed after a read-only one that contains it stays writable.
    ``shared_caches=False`` leaves the compiler caches out of the view: a process no
    cache-guard window watches must not see them.
    """
    root = _root_mode(binary)
    args = [
        binary,
        # user (unless root: see root_drop_args), pid, net, ipc, uts, cgroup
        *(_root_namespaces() if root else ["--unshare-all"]),
        "--die-with-parent",
        "--new-session",
        *(_root_caps() if root else ["--cap-drop", "ALL"]),
        *_system_args(),
        "--size",
        str(tmp_bytes),
        "--tmpfs",
        "/tmp",
    ]
    caches = cache_dirs() if shared_caches else []
    for path, writable in _ordered_binds([*python_paths(), *ro], [*caches, *rw]):
        args += ["--bind" if writable else "--ro-bind", str(path), str(path)]
    answers = vector_isa.record_dir()
    with contextlib.suppress(OSError):  # no folder, no bind: children ask for themselves
        answers.mkdir(parents=True, exist_ok=True)
        if not _too_broad(str(answers)):  # a misnamed folder (a home) is never shown
            args += ["--ro-bind", str(answers), VECTOR_ISA_VIEW]
    if chdir is not None:
        args += ["--chdir", str(chdir)]
    # The sandbox's own root (a tmpfs holding the mount points) becomes read-only too:
    # nothing may be created outside /tmp and the writable binds.
    return [*args, "--remount-ro", "/", "--", *(root_drop_args(sandbox_uid()) if root else [])]


def _ordered_binds(ro: Iterable[Path], rw: Iterable[Path]) -> list[tuple[Path, bool]]:
    """Parents before children (a later mount covers an earlier one); rw wins a tie."""
    modes: dict[Path, bool] = {}
    for path in rw:
        path = Path(os.path.abspath(path))
        path.mkdir(parents=True, exist_ok=True)
        modes[path] = True
    for path in ro:
        path = Path(os.path.abspath(path))
        if path.exists():
            modes.setdefault(path, False)
    return sorted(modes.items(), key=lambda item: len(item[0].parts))


def wrap_job(
    argv: list[str], job: Mapping[str, Any], workdir: Path, limits: SandboxLimits
) -> list[str]:
    """``argv`` (a gate child) inside a sandbox that sees only what ``job`` names."""
    binary = require()
    view = job_view(job, workdir)
    return [
        *bwrap_args(
            binary,
            ro=[*view.ro, *view.blobs],
            rw=view.rw,
            chdir=workdir,
            tmp_bytes=limits.tmp_bytes,
        ),
        *argv,
    ]


def wrap_command(
    argv: list[str],
    *,
    ro: Iterable[Path] = (),
    rw: Iterable[Path] = (),
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
    extra: Mapping[str, str] | None = None,
    shared_caches: bool = True,
) -> tuple[list[str], dict[str, str]]:
    """Any other process that imports candidate code (the ncu profiler's harness runner):
    ``argv`` inside a sandbox that sees ``ro``/``rw``, and its allow-listed environment.

    ``extra`` goes into the environment as ``sandbox_env`` allows.  With
    ``KERNELOPT_SANDBOX=off`` the command is returned as is (and a warning logged).
    ``shared_caches=False``: the compiler caches are private ones in its ``/tmp``.
    """
    base = dict(os.environ if env is None else env)
    if not enabled():
        warn_unsandboxed(Path(argv[0]).name)
        return list(argv), base
    limits = SandboxLimits.from_env()
    args = bwrap_args(
        require(), ro=ro, rw=rw, chdir=cwd, tmp_bytes=limits.tmp_bytes, shared_caches=shared_caches
    )
    child_env = sandbox_env(base, extra)
    if not shared_caches:
        child_env["TRITON_CACHE_DIR"] = "/tmp/triton"
        child_env["TORCHINDUCTOR_CACHE_DIR"] = "/tmp/inductor"
    return [*args, *argv], child_env


def confine_preflight(
    argv: list[str], env: Mapping[str, str], files: list[Path]
) -> tuple[list[str], dict[str, str]]:
    """``kernelopt.preflight_problem``'s child, which imports a candidate before any gate:
    the gate children's sandbox, seeing only ``files`` and none of the shared caches."""
    from kernelopt.preflight_problem import SECONDS_ENV

    passed = {k: env[k] for k in ("CUDA_VISIBLE_DEVICES", SECONDS_ENV) if k in env}
    return wrap_command(
        argv,
        ro=[Path(f).resolve() for f in files],
        cwd=Path("/tmp"),
        env=env,
        extra=passed,
        shared_caches=False,
    )
