"""The first timing round's child, started while gates 1-3 run (``GateSettings.prestart_timing``).

A paired timing child spends its first seconds on things that do not depend
on the candidate: the process, CUDA, the baseline's build (a compiled wrapper
loads its kernels).  Started before the candidate's gates 1-3 child, it does
that meanwhile and then waits (``gates.go_signal``): no call of the baseline,
no input, no candidate and nothing timed until the parent's go, which comes
only once gates 1-3 have passed and the candidate child has exited; else it
gets stop and ends.  The compiler caches it loads the baseline's kernels from
are watched from before it starts (inode, size, change time, as
``gates.cache_guard`` does): if any cached file changed or went while the two
ran side by side -- the candidate child rewriting a cached kernel and putting
it back, which the guard's content check cannot see -- it is discarded and
the round runs in a fresh child, as without this setting.  The input files
are read only after go (after gates 1-3 checked them); the problem copy and
the policy file are read-only in the candidate's sandbox.
"""

from __future__ import annotations

import os
import time
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

from gates.cache_guard import Stat, file_state, snapshot
from gates.go_signal import GoSignal, live_workdir
from gates.protocol import TimingJob
from gates.runner import ChildOutcome, run_job
from kernelopt.log import get_logger

log = get_logger(__name__)

_READY_S = 60.0  # the child reads its job within a second or two of being started


def file_states(paths: list[Path]) -> dict[str, Stat]:
    """Inode, size and change time of every file at or below ``paths``."""
    states = snapshot([p for p in paths if p.is_dir()])
    for path in paths:
        if path.is_file():
            states[str(path)] = file_state(os.lstat(path))
    return states


def changed(before: dict[str, Stat], after: dict[str, Stat]) -> list[str]:
    """Files of ``before`` rewritten, replaced or removed since (new files are not)."""
    return sorted(p for p, state in before.items() if after.get(p) != state)


class PrestartedRound:
    """A round-0 timing child running ahead: its baseline built, waiting for go or stop."""

    def __init__(
        self,
        job: TimingJob,
        workdir: Path,
        *,
        timeout_s: float,
        wait_s: float,
        device: str,
        watched: list[Path],
    ) -> None:
        self.workdir = Path(workdir)
        self._signal = GoSignal()
        self.job = job.model_copy(update={"go_digest": self._signal.digest, "go_timeout_s": wait_s})
        self._watched = watched
        self._before = file_states(watched)
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="prestart")
        self._future: Future[ChildOutcome] = self._pool.submit(
            run_job, self.job, self.workdir, timeout_s=timeout_s + wait_s, device=device
        )
        self._settled = False
        self._wait_until_started()

    def _wait_until_started(self) -> None:
        """Until the child has read its job (its first mark): nothing started after it can
        have changed that job."""
        deadline = time.monotonic() + _READY_S
        while not self._future.done() and time.monotonic() < deadline:
            if (live_workdir(self.workdir) / "progress.jsonl").is_file():
                return
            time.sleep(0.005)

    def go(self) -> ChildOutcome | None:
        """Release the child and wait for its round; None when it was discarded instead."""
        if self._settled:
            return None
        if self._future.done():
            # it ended before its go: killed (a candidate child of the same sandbox can
            # signal its siblings) or crashed building the baseline; a fresh child runs the
            # round, so the candidate cannot turn its gate into the baseline's failure
            ended = self._future.result()
            log.info("prestart.ended_early", status=ended.status, phase=ended.phase)
            self._settled = True
            self._pool.shutdown()
            return None
        moved = changed(self._before, file_states(self._watched))
        if moved:
            log.info("prestart.discarded", changed=moved[:5], count=len(moved))
            self.stop()
            return None
        self._settled = True
        self._signal.send(live_workdir(self.workdir), go=True)
        outcome = self._future.result()
        self._pool.shutdown()
        return outcome

    def stop(self) -> None:
        """Tell the child to end without running anything more, and wait for it."""
        if self._settled:
            return
        self._settled = True
        if not self._future.done():
            try:
                self._signal.send(live_workdir(self.workdir), go=False)
            except OSError as exc:  # it ends at its own go timeout
                log.warning("prestart.stop_failed", error=str(exc))
        self._future.result()
        self._pool.shutdown()
