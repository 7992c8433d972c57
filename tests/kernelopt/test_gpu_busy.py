"""The GPU worker's NVML sampler: totals, windows per activity, campaign figures, no NVML.

A scripted source and clock stand in for NVML on the CPU; the last test reads
the real NVML of the GPU host.
"""

from __future__ import annotations

import dataclasses
import sys
import time
import types
from pathlib import Path

import pytest
from pydantic import BaseModel
from structlog.testing import capture_logs
from temporalio import activity
from temporalio.testing import ActivityEnvironment

from activities.gpu_busy import sampled
from kernelopt import gpu_busy
from kernelopt.contracts import names
from kernelopt.gpu_busy import (
    NVML_UNAVAILABLE,
    BusySampler,
    campaign_busy,
    campaign_of,
    load_activities,
    start_sampler,
    summarize_campaign,
)


class Script:
    """Readings and clock ticks in order; each ``read`` moves the clock one step."""

    def __init__(self, readings: list[tuple[float, float]], step_s: float = 0.2) -> None:
        self.readings = list(readings)
        self.step_s = step_s
        self.now = 100.0

    def read(self) -> tuple[float, float]:
        self.now += self.step_s
        return self.readings.pop(0)

    def clock(self) -> float:
        return self.now


def _sampler(readings: list[tuple[float, float]]) -> tuple[BusySampler, Script]:
    script = Script(readings)
    return BusySampler(script.read, clock=script.clock), script


def test_totals_average_the_readings_and_count_the_time_between_them() -> None:
    sampler, _ = _sampler([(100, 40), (0, 0), (50, 20), (90, 60)])
    for _ in range(4):
        sampler.sample_once()
    t = sampler.snapshot()
    assert t.samples == 4
    assert t.mean_gpu == pytest.approx(60.0)
    assert t.mean_memory == pytest.approx(30.0)
    assert t.busy_fraction == pytest.approx(0.75)
    assert t.seconds == pytest.approx(0.6)  # three gaps of 0.2 s; the first sample opens


def test_a_failed_read_is_skipped_and_logged_once() -> None:
    calls = iter([(80.0, 10.0), RuntimeError("gone"), RuntimeError("gone"), (40.0, 10.0)])

    def read() -> tuple[float, float]:
        item = next(calls)
        if isinstance(item, Exception):
            raise item
        return item

    sampler = BusySampler(read)
    with capture_logs() as logs:
        for _ in range(4):
            sampler.sample_once()
    assert sampler.snapshot().samples == 2
    assert sampler.snapshot().mean_gpu == pytest.approx(60.0)
    assert [e["event"] for e in logs] == ["gpu busy: a utilisation read failed"]


def _run_activity(sampler: BusySampler, home: Path, campaign: str, name: str, during: list) -> None:
    """A window around ``during`` readings taken while the activity runs."""
    with sampler.window(campaign, name, home):
        for _ in during:
            sampler.sample_once()


def test_the_search_span_counts_idle_gaps_that_activity_windows_leave_out(tmp_path: Path) -> None:
    # compile (busy), then two gate activities at 90% with an idle gap of three 0% readings
    # between them; each window's closing read is its last reading
    sampler, _ = _sampler(
        [(100, 50)] * 2 + [(90, 30)] * 2 + [(0, 0)] * 3 + [(90, 30)] * 2 + [(0, 0)]
    )
    _run_activity(sampler, tmp_path, "camp", names.COMPILE, [1])  # 2 readings with the close
    _run_activity(sampler, tmp_path, "camp", names.GATE_CANDIDATE, [1])
    for _ in range(3):
        sampler.sample_once()  # nothing of this campaign runs
    _run_activity(sampler, tmp_path, "camp", names.GATE_CANDIDATE, [1])
    sampler.sample_once()  # after the search: not in its span

    busy = summarize_campaign(load_activities(tmp_path, "camp"))
    assert busy.measured and busy.activities == 3 and busy.search_activities == 2
    assert busy.while_searching.samples == 4
    assert busy.while_searching.mean_gpu == pytest.approx(90.0)
    # the span starts at the first gate's start note (after compile's readings)
    assert busy.search_span.samples == 7
    assert busy.search_span.mean_gpu == pytest.approx(4 * 90 / 7)
    assert busy.all_activities.samples == 6
    assert busy.all_activities.mean_gpu == pytest.approx((2 * 100 + 4 * 90) / 6)


def test_spans_of_two_worker_sessions_are_added_not_subtracted_across(tmp_path: Path) -> None:
    first, _ = _sampler([(50, 0)] * 10)
    second, _ = _sampler([(100, 0)] * 3)
    for _ in range(5):
        first.sample_once()  # running totals of a worker that lived before this campaign
    _run_activity(first, tmp_path, "camp", names.GATE_CANDIDATE, [1])
    _run_activity(second, tmp_path, "camp", names.GATE_CANDIDATE, [1, 1])
    busy = summarize_campaign(load_activities(tmp_path, "camp"))
    assert busy.search_span.samples == 2 + 3
    assert busy.search_span.mean_gpu == pytest.approx((2 * 50 + 3 * 100) / 5)


def test_without_nvml_every_activity_records_not_measured(tmp_path: Path) -> None:
    sampler = BusySampler(None, reason=NVML_UNAVAILABLE)
    _run_activity(sampler, tmp_path, "camp", names.GATE_CANDIDATE, [])
    busy = campaign_busy(tmp_path, "camp")
    assert busy is not None and not busy.measured
    assert busy.reason == NVML_UNAVAILABLE
    assert campaign_busy(tmp_path, "another") is None


def test_a_torn_line_is_skipped(tmp_path: Path) -> None:
    sampler, _ = _sampler([(70, 0)] * 2)
    _run_activity(sampler, tmp_path, "camp", names.SCREEN, [1])
    path = gpu_busy.busy_path(tmp_path, "camp")
    path.write_text(path.read_text() + '{"campaign_id": "camp", "activ')
    assert len(load_activities(tmp_path, "camp")) == 1


def test_a_failing_activity_is_noted_and_an_unwritable_home_never_fails_one(
    tmp_path: Path,
) -> None:
    sampler, _ = _sampler([(50, 0)] * 2)
    with pytest.raises(RuntimeError), sampler.window("camp", names.GATE_CANDIDATE, tmp_path):
        raise RuntimeError("the activity's own failure")
    assert len(load_activities(tmp_path, "camp")) == 1
    blocked = tmp_path / "a-file"
    blocked.write_text("")
    with capture_logs() as logs, sampler.window("camp", names.GATE_CANDIDATE, blocked):
        pass
    assert "gpu busy: could not record" in [e["event"] for e in logs]


def _fake_pynvml(monkeypatch: pytest.MonkeyPatch, init_error: bool) -> types.ModuleType:
    fake = types.ModuleType("pynvml")

    class NVMLError(Exception):
        pass

    def init() -> None:
        if init_error:
            raise NVMLError("Driver Not Loaded")

    fake.NVMLError = NVMLError  # type: ignore[attr-defined]
    fake.nvmlInit = init  # type: ignore[attr-defined]
    fake.nvmlShutdown = lambda: None  # type: ignore[attr-defined]
    fake.nvmlDeviceGetHandleByIndex = lambda i: f"h{i}"  # type: ignore[attr-defined]
    fake.nvmlDeviceGetUtilizationRates = lambda h: types.SimpleNamespace(gpu=75, memory=5)  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    return fake


def test_nvml_init_error_means_not_measured_logged_once(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    _fake_pynvml(monkeypatch, init_error=True)
    with capture_logs() as logs:
        sampler = start_sampler("0")
        _run_activity(sampler, tmp_path, "camp", names.GATE_CANDIDATE, [1])
        _run_activity(sampler, tmp_path, "camp", names.GATE_CANDIDATE, [1])
        sampler.close()
    assert not sampler.measured and sampler.reason == NVML_UNAVAILABLE
    assert [e["event"] for e in logs] == [NVML_UNAVAILABLE]
    assert logs[0]["error"] == "Driver Not Loaded"


def test_missing_pynvml_means_not_measured(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import raises ImportError
    sampler = start_sampler("0")
    assert not sampler.measured


def test_the_thread_samples_until_closed(monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_pynvml(monkeypatch, init_error=False)
    sampler = start_sampler("0", interval_s=0.01)
    try:
        deadline = time.monotonic() + 10
        while sampler.snapshot().samples < 3 and time.monotonic() < deadline:
            time.sleep(0.01)
    finally:
        sampler.close()
    stopped = sampler.snapshot()
    assert stopped.samples >= 3 and stopped.mean_gpu == pytest.approx(75.0)
    time.sleep(0.05)
    assert sampler.snapshot().samples == stopped.samples


class _In(BaseModel):
    n: int


class _Out(BaseModel):
    n: int


@activity.defn(name=names.GATE_CANDIDATE)
async def _gate(inp: _In) -> _Out:
    return _Out(n=inp.n + 1)


async def test_a_wrapped_activity_keeps_its_name_and_notes_its_campaign(tmp_path: Path) -> None:
    sampler, _ = _sampler([(60, 0)])
    wrapped = sampled(_gate, sampler, tmp_path)
    assert activity._Definition.must_from_callable(wrapped).name == names.GATE_CANDIDATE
    env = ActivityEnvironment()
    env.info = dataclasses.replace(
        env.info, workflow_id="camp-1/search/forward", activity_type=names.GATE_CANDIDATE
    )
    assert (await env.run(wrapped, _In(n=1))).n == 2
    [record] = load_activities(tmp_path, "camp-1")
    assert record.activity == names.GATE_CANDIDATE and record.totals.samples == 1
    assert campaign_of("camp-1") == "camp-1"


@pytest.mark.gpu
def test_real_nvml_sees_a_busy_gpu(tmp_path: Path) -> None:
    import torch

    sampler = start_sampler("0", interval_s=0.05)
    try:
        assert sampler.measured, sampler.reason
        x = torch.randn(4096, 4096, device="cuda")
        with sampler.window("camp", names.GATE_CANDIDATE, tmp_path):
            end = time.monotonic() + 1.5
            while time.monotonic() < end:
                for _ in range(20):
                    x = (x @ x).tanh_()
                torch.cuda.synchronize()
    finally:
        sampler.close()
    busy = summarize_campaign(load_activities(tmp_path, "camp"))
    assert busy.while_searching.samples >= 10
    assert (busy.while_searching.mean_gpu or 0.0) > 50.0


async def test_a_stored_result_returned_by_memoized_does_no_gpu_work_and_leaves_no_note(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from activities.idempotent import memoized

    monkeypatch.setenv("KERNELOPT_HOME", str(tmp_path / "home"))
    sampler, _ = _sampler([(60, 0)] * 4)
    wrapped = memoized(sampled(_gate, sampler, tmp_path))  # as build_gpu_worker stacks them
    env = ActivityEnvironment()
    env.info = dataclasses.replace(
        env.info, workflow_id="camp-2", activity_type=names.GATE_CANDIDATE
    )
    assert (await env.run(wrapped, _In(n=1))).n == 2
    assert (await env.run(wrapped, _In(n=1))).n == 2  # the same call again: stored
    assert len(load_activities(tmp_path, "camp-2")) == 1
