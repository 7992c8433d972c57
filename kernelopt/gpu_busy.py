"""How busy the GPU is while a campaign searches: NVML utilisation sampled in the GPU worker.

Issue 22 point 4 asks for a GPU at least 80% busy during a campaign's search,
so the GPU worker runs one background thread that reads
``nvmlDeviceGetUtilizationRates`` at a fixed interval for as long as the worker
lives.  It keeps running totals only; each GPU activity notes the totals when
it starts and ends and appends both to ``$KERNELOPT_HOME/gpu-busy/<campaign>.jsonl``.
Any window is then the difference of two notes of one worker: an activity's own
time, or the span from a campaign's first search activity to its last, idle gaps
between activities included (those gaps are what the issue wants gone).

Without NVML (no GPU, no driver, no ``pynvml``) the worker logs it once and
records "not measured"; sampling is a diagnostic and never fails an activity.
"""

from __future__ import annotations

import contextlib
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

from pydantic import ValidationError

from kernelopt.contracts import names
from kernelopt.contracts.base import Frozen
from kernelopt.log import get_logger

log = get_logger(__name__)

DEFAULT_INTERVAL_S = 0.2
BUSY_DIR = "gpu-busy"  # under KERNELOPT_HOME: one JSON-lines file per campaign
# the search's GPU activities; compile, triage and the model-level gates come before or after it
SEARCH_ACTIVITIES = frozenset({names.PROFILE, names.GATE_CANDIDATE, names.SCREEN})
NVML_UNAVAILABLE = "NVML not available"

Sample = tuple[float, float]  # (GPU utilisation %, memory-controller utilisation %)
SampleSource = Callable[[], Sample]


class NvmlUnavailable(Exception):
    """NVML cannot be read on this machine (no GPU, no driver, no ``pynvml``)."""


class BusyTotals(Frozen):
    """Running sums over samples; windows subtract two of them, campaigns add them."""

    samples: int = 0
    busy_samples: int = 0  # GPU utilisation above 0
    gpu_sum: float = 0.0
    memory_sum: float = 0.0
    seconds: float = 0.0  # time the samples cover: the gaps between consecutive samples

    def minus(self, earlier: BusyTotals) -> BusyTotals:
        return BusyTotals(
            samples=self.samples - earlier.samples,
            busy_samples=self.busy_samples - earlier.busy_samples,
            gpu_sum=self.gpu_sum - earlier.gpu_sum,
            memory_sum=self.memory_sum - earlier.memory_sum,
            seconds=self.seconds - earlier.seconds,
        )

    def plus(self, other: BusyTotals) -> BusyTotals:
        return BusyTotals(
            samples=self.samples + other.samples,
            busy_samples=self.busy_samples + other.busy_samples,
            gpu_sum=self.gpu_sum + other.gpu_sum,
            memory_sum=self.memory_sum + other.memory_sum,
            seconds=self.seconds + other.seconds,
        )

    @property
    def mean_gpu(self) -> float | None:
        return self.gpu_sum / self.samples if self.samples else None

    @property
    def mean_memory(self) -> float | None:
        return self.memory_sum / self.samples if self.samples else None

    @property
    def busy_fraction(self) -> float | None:
        return self.busy_samples / self.samples if self.samples else None


class ActivityBusy(Frozen):
    """One GPU activity's notes: the worker's totals when it started and when it ended."""

    campaign_id: str
    activity: str
    worker: str  # the sampler's session: only notes of one session may be subtracted
    started_at: float  # epoch seconds
    ended_at: float
    measured: bool
    reason: str = ""  # why it was not measured
    start: BusyTotals = BusyTotals()
    end: BusyTotals = BusyTotals()

    @property
    def totals(self) -> BusyTotals:
        return self.end.minus(self.start)


def nvml_source(device: str) -> tuple[SampleSource, Callable[[], None]]:
    """A reader of one GPU's utilisation and the call that releases NVML.

    ``device`` is what the worker pinned in CUDA_VISIBLE_DEVICES: an index
    (NVML counts GPUs in PCI order, as CUDA does with several GPUs of one model)
    or a ``GPU-...`` UUID.  Raises ``NvmlUnavailable`` when NVML cannot be read.
    """
    try:
        import pynvml
    except ImportError as exc:
        raise NvmlUnavailable(f"pynvml is not installed ({exc})") from exc
    try:
        pynvml.nvmlInit()
        handle = (
            pynvml.nvmlDeviceGetHandleByIndex(int(device))
            if device.isdigit()
            else pynvml.nvmlDeviceGetHandleByUUID(device)
        )
    except pynvml.NVMLError as exc:
        raise NvmlUnavailable(str(exc)) from exc

    def read() -> Sample:
        rates = pynvml.nvmlDeviceGetUtilizationRates(handle)
        return float(rates.gpu), float(rates.memory)

    def release() -> None:
        with contextlib.suppress(pynvml.NVMLError):
            pynvml.nvmlShutdown()

    return read, release


class BusySampler:
    """Running utilisation totals of one GPU, fed by a background thread.

    ``source`` None means not measured (``reason`` says why): every window then
    records that instead of numbers.  ``clock`` is injectable so tests can feed
    a scripted sequence of samples at scripted times.
    """

    def __init__(
        self,
        source: SampleSource | None,
        *,
        interval_s: float = DEFAULT_INTERVAL_S,
        reason: str = "",
        clock: Callable[[], float] = time.monotonic,
        release: Callable[[], None] | None = None,
    ) -> None:
        self.source = source
        self.interval_s = interval_s
        self.reason = reason
        self.session = uuid.uuid4().hex[:12]
        self._clock = clock
        self._release = release
        self._lock = threading.Lock()
        self._totals = BusyTotals()
        self._last: float | None = None
        self._read_failed = False
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def measured(self) -> bool:
        return self.source is not None

    def sample_once(self) -> None:
        """Add one reading; a failed read is skipped (and logged once), never raised."""
        if self.source is None:
            return
        try:
            gpu, memory = self.source()
        except Exception as exc:  # a diagnostic: a bad read must not stop the worker
            if not self._read_failed:
                log.warning("gpu busy: a utilisation read failed", error=str(exc)[:200])
                self._read_failed = True
            return
        now = self._clock()
        with self._lock:
            t = self._totals
            gap = 0.0 if self._last is None else max(0.0, now - self._last)
            self._last = now
            self._totals = BusyTotals(
                samples=t.samples + 1,
                busy_samples=t.busy_samples + (1 if gpu > 0 else 0),
                gpu_sum=t.gpu_sum + gpu,
                memory_sum=t.memory_sum + memory,
                seconds=t.seconds + gap,
            )

    def snapshot(self) -> BusyTotals:
        with self._lock:
            return self._totals

    def start(self) -> BusySampler:
        """Sample every ``interval_s`` in a daemon thread until ``close``."""
        if self.source is not None and self._thread is None:
            self._thread = threading.Thread(target=self._run, name="gpu-busy", daemon=True)
            self._thread.start()
        return self

    def _run(self) -> None:
        self.sample_once()
        while not self._stop.wait(self.interval_s):
            self.sample_once()

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5 * self.interval_s + 1.0)
            self._thread = None
        if self._release is not None:
            self._release()
            self._release = None

    @contextlib.contextmanager
    def window(self, campaign_id: str, activity: str, home: Path) -> Iterator[None]:
        """Note the totals around the body and append them to the campaign's file."""
        started_at, start = time.time(), self.snapshot()
        try:
            yield
        finally:
            if self.measured:
                self.sample_once()  # the last reading belongs to this activity
            record = ActivityBusy(
                campaign_id=campaign_id,
                activity=activity,
                worker=self.session,
                started_at=started_at,
                ended_at=time.time(),
                measured=self.measured,
                reason=self.reason,
                start=start,
                end=self.snapshot(),
            )
            record_activity(home, record)
            if self.measured:
                t = record.totals
                log.info(
                    "gpu busy",
                    campaign=campaign_id,
                    activity=activity,
                    gpu_pct=round(t.mean_gpu, 1) if t.mean_gpu is not None else None,
                    samples=t.samples,
                    seconds=round(record.ended_at - record.started_at, 2),
                )


def start_sampler(device: str, interval_s: float = DEFAULT_INTERVAL_S) -> BusySampler:
    """The GPU worker's sampler, already running; "not measured" (logged once) without NVML."""
    try:
        read, release = nvml_source(device)
    except NvmlUnavailable as exc:
        log.info(NVML_UNAVAILABLE, device=device, error=str(exc)[:200])
        return BusySampler(None, interval_s=interval_s, reason=NVML_UNAVAILABLE)
    log.info("gpu busy: sampling NVML utilisation", device=device, interval_s=interval_s)
    return BusySampler(read, interval_s=interval_s, release=release).start()


def campaign_of(workflow_id: str) -> str:
    """The campaign a workflow belongs to: searches run as ``<campaign>/search/<target>``."""
    return workflow_id.split("/", 1)[0]


def busy_path(home: Path, campaign_id: str) -> Path:
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in campaign_id)
    return Path(home) / BUSY_DIR / f"{safe}.jsonl"


def record_activity(home: Path, record: ActivityBusy) -> None:
    """Append one line; a write that fails is logged, never raised (a diagnostic)."""
    path = busy_path(home, record.campaign_id)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("a", encoding="utf-8") as fh:
            fh.write(record.model_dump_json() + "\n")
    except OSError as exc:
        log.warning("gpu busy: could not record", path=str(path), error=str(exc)[:200])


def load_activities(home: Path, campaign_id: str) -> list[ActivityBusy]:
    """Every readable note of the campaign (a torn or foreign line is skipped)."""
    path = busy_path(home, campaign_id)
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError:
        return []
    out = []
    for line in lines:
        with contextlib.suppress(ValidationError, ValueError):
            out.append(ActivityBusy.model_validate_json(line))
    return out


class CampaignBusy(Frozen):
    """What the campaign report shows: utilisation over the search and over activities."""

    measured: bool
    reason: str = ""  # why not measured
    activities: int = 0  # measured GPU activities
    search_activities: int = 0
    search_span: BusyTotals = BusyTotals()  # first to last search activity, gaps included
    search_span_seconds: float = 0.0  # wall time of those spans (summed over workers)
    while_searching: BusyTotals = BusyTotals()  # only while search activities ran
    all_activities: BusyTotals = BusyTotals()  # while any of the campaign's GPU activities ran


def summarize_campaign(records: list[ActivityBusy]) -> CampaignBusy:
    """One campaign's figures from its notes; spans are taken per worker session and added."""
    measured = [r for r in records if r.measured]
    if not measured:
        reason = next((r.reason for r in records if r.reason), "")
        return CampaignBusy(
            measured=False, reason=reason or "no GPU activity of this campaign recorded samples"
        )
    search = [r for r in measured if r.activity in SEARCH_ACTIVITIES]
    span, span_seconds = BusyTotals(), 0.0
    for session in dict.fromkeys(r.worker for r in search):
        mine = [r for r in search if r.worker == session]
        first = min(mine, key=lambda r: r.started_at)
        last = max(mine, key=lambda r: r.ended_at)
        span = span.plus(last.end.minus(first.start))
        span_seconds += last.ended_at - first.started_at
    return CampaignBusy(
        measured=True,
        activities=len(measured),
        search_activities=len(search),
        search_span=span,
        search_span_seconds=span_seconds,
        while_searching=_summed(search),
        all_activities=_summed(measured),
    )


def _summed(records: list[ActivityBusy]) -> BusyTotals:
    """The activities' totals added up, in order (the campaign's figures over them)."""
    total = BusyTotals()
    for r in records:
        total = total.plus(r.totals)
    return total


def campaign_busy(home: Path, campaign_id: str) -> CampaignBusy | None:
    """The campaign's figures, or None when no GPU worker left notes for it here."""
    records = load_activities(home, campaign_id)
    return summarize_campaign(records) if records else None
