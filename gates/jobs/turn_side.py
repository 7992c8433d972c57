"""Turn child: one side of a turn session, built, warmed and sampled as a timing child's side.

``GateSettings.turn_pairs`` times the baseline and the candidate in two live
children that take turns (``gates.turns``).  Each child builds, warms, settles
and takes its CUDA-event samples with ``gates.jobs.timing``'s functions (briefly,
without settling steps, under ``turn_prep_calls``), then times nothing itself: it runs checked turns on the
parent's commands, and the parent's clock is the host number.  A turn answers
``synced`` after its calls' final sync and ``done`` once every output is
recorded, so the parent can tell the record phase (the harness's) apart.  The baseline
child never sees the candidate (its job names only the baseline); the
candidate child builds nothing before the parent's ``start``, which comes once
the baseline is built and warm, so no candidate code runs beside the baseline's
first calls (a compiled baseline autotunes there).  The baseline child also
answers ``probe``: it waits until the GPU is idle again, so the parent can
charge work a side left queued to that side.  With ``GateSettings.turn_probe_child``
a third child (``side == "probe"``, the baseline's job) answers the probes
instead: it builds no model, imports no problem file, and serves only the idle
probe (``_serve_probes``), so both sides' turns are entered from and left to the
same process.
"""

from __future__ import annotations

import gc
import os

import torch

from gates.checked_calls import held_calls
from gates.job_progress import job_file
from gates.job_progress import mark as child_mark
from gates.jobs.timing import build_side, cpu_threads, finish_side, settle_and_sample
from gates.perfstats import median
from gates.protocol import TimingJob, TimingResult
from gates.reaper import become_subreaper
from gates.timers import TimerKit, calls_for  # the kit is made before the candidate is imported
from gates.turn_channel import COMMANDS, REPLIES
from kernelopt.precision import strict_fp32

JOB_TYPE = TimingJob

_QUIET_CALLS = 20  # tiny synchronised ops that give the probe its quiet latency
_QUIET_SLACK = 2.0  # a probe op within this many times the quiet latency (plus _QUIET_NS): idle
_QUIET_NS = 20_000
_PROBE_MAX_NS = 10_000_000_000  # work left queued for longer than this is charged as this


class IdleProbe:
    """A tiny trusted CUDA op, synchronised, until its latency is back to its quiet value.

    Work a side queued just before it said done runs on into the next turn,
    whoever owns it; the baseline child (trusted), or the probe child where there
    is one, waits it out before every turn and reports how long, so the parent
    adds that to the turn it came from.  The quiet latency is measured once,
    right after the baseline's warm-up, before any candidate code exists.  On
    the CPU there is nothing to wait for.
    """

    def __init__(self, kit: TimerKit) -> None:
        self.kit = kit
        self.quiet_ns = 0
        self._x: torch.Tensor | None = None
        if kit.cuda:
            self._x = torch.zeros(1, device="cuda")
            self.quiet_ns = int(median([self._op_ns() for _ in range(_QUIET_CALLS)]))

    def _op_ns(self) -> int:
        t0 = self.kit.now_ns()
        if self._x is not None:
            self._x.add_(1.0)
        self.kit.sync()
        return self.kit.now_ns() - t0

    def wait_ns(self) -> int:
        """Nanoseconds the GPU stayed busy with work queued before this call (0 on the CPU)."""
        if self._x is None:
            return 0
        t0 = self.kit.now_ns()
        limit = self.quiet_ns * _QUIET_SLACK + _QUIET_NS
        while self._op_ns() > limit and self.kit.now_ns() - t0 < _PROBE_MAX_NS:
            pass
        return max(0, self.kit.now_ns() - t0 - self.quiet_ns)


class _Commands:
    """The child's end of ``gates.turn_channel``: blocking reads, one write per reply."""

    def __init__(self) -> None:
        self._in = open(job_file(COMMANDS), "rb", buffering=0)  # noqa: SIM115 (lives with the job)
        self._out = os.open(job_file(REPLIES), os.O_WRONLY)
        self._buffer = b""

    def next(self) -> tuple[str, str, str]:
        """(word, sequence, argument) of the parent's next command; EOF ends the session."""
        while b"\n" not in self._buffer:
            chunk = self._in.read(4096)
            if not chunk:
                raise EOFError("the turn session's parent went away")
            self._buffer += chunk
        raw, self._buffer = self._buffer.split(b"\n", 1)
        word, seq, arg = ([*raw.decode(errors="replace").split(), "", "", ""])[:3]
        return word, seq, arg

    def reply(self, line: str) -> None:
        os.write(self._out, (line + "\n").encode())


def run(job: TimingJob) -> TimingResult:
    """Build and warm ``job.model``, then answer the parent's commands until ``end``."""
    # orphans of anything it starts stay in its tree, which the parent stops as one
    # (``gates.proctree``), and are not adopted by a zygote serving other children
    become_subreaper()
    gc.freeze()  # as a timing child: later collections scan only what the model made
    strict_fp32()  # before the kit: it snapshots these switches as the honest state
    cpu_threads(job.device)  # as a timing child: before the model is built
    kit = TimerKit(job.device)
    if job.baseline is not None or job.go_digest:
        raise ValueError("a turn child times one side, started by the parent's commands")
    channel = _Commands()
    if job.side in ("candidate", "probe"):
        word, _, _ = channel.next()
        if word != "start":
            raise RuntimeError(f"a turn child's first command must be start, not {word!r}")
    if job.side == "probe":
        return _serve_probes(kit, channel)
    with torch.no_grad():
        side = build_side(kit, job, job.model)
        probe = IdleProbe(kit) if job.side == "baseline" else None
        channel.reply("warmed")
        host: list[float] = []
        turn_ms: list[float] = []
        calls = 0
        while True:
            word, seq, arg = channel.next()
            if word == "prep":
                settle_and_sample(kit, job, side)
                side.mark("turns")
                most = held_calls(job.expected, job.held_output_bytes)
                per_call = 1 if side.slow else calls_for(side.event_ms, job.host_batch_ms, most)
                host = [side.loop.host_batch(per_call)]
                channel.reply(f"ready {seq} {max(side.event_ms, host[0]):.9g}")
            elif word == "probe" and probe is not None:
                channel.reply(f"probed {seq} {probe.wait_ns()}")
            elif word == "turn" and arg.isdigit() and host:
                calls = int(arg)
                turn_ms.append(side.loop.turn(calls, lambda s=seq: channel.reply(f"synced {s}")))
                channel.reply(f"done {seq}")
            elif word == "end":
                channel.reply(f"ended {seq}")
                break
            else:
                raise RuntimeError(f"unexpected turn command {word!r}")
        return finish_side(
            kit,
            job,
            side,
            job.side,
            host=host or [float("nan")],
            calls=calls,
            checks_file=job.checks_file,
            turn_ms=turn_ms,
        )


def _serve_probes(kit: TimerKit, channel: _Commands) -> TimingResult:
    """The probe child (``GateSettings.turn_probe_child``): the idle probe alone until ``end``.

    No model is built nor its problem file imported: the child's job is the baseline's
    (trusted, it names no candidate), and only the kit and the probe are made.  Its
    ``start`` comes once the baseline is warm and waiting, before any candidate code
    runs, so the quiet latency is an idle GPU's.  Its result says only that it ended.
    """
    child_mark("probe")
    with torch.no_grad():
        probe = IdleProbe(kit)
        channel.reply("warmed")
        while True:
            word, seq, _ = channel.next()
            if word == "probe":
                channel.reply(f"probed {seq} {probe.wait_ns()}")
            elif word == "end":
                channel.reply(f"ended {seq}")
                break
            else:
                raise RuntimeError(f"unexpected probe command {word!r}")
    return TimingResult(side="probe", event_ms=None, host_ms=0.0)
