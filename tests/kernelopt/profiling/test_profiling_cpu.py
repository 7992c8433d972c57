"""Profiler and analyst on the CPU: report distilling, classification, and every fallback path."""

from __future__ import annotations

import stat
import subprocess
import sys
from pathlib import Path

import pytest

from kernelopt.contracts.compiled import (
    KernelArg,
    KernelLaunch,
    SearchMode,
    SearchTarget,
    SegmentResult,
    TargetKind,
    TensorSpec,
    TritonKernel,
)
from kernelopt.contracts.problem import ProblemSpec
from kernelopt.contracts.search import Bottleneck, KernelProfile, ProfileInput
from kernelopt.profiling.analyst import classify
from kernelopt.profiling.distill import distill, distill_raw_csv, parse_rules_text
from kernelopt.profiling.harness_files import candidate_harnesses, is_self_harness
from kernelopt.profiling.ncu import profile_command
from kernelopt.profiling.profile import profile_target
from kernelopt.store import open_store
from tests.support.compiled import stub_compiled
from tests.support.inductor_samples import POINTWISE

DATA = Path(__file__).resolve().parents[2] / "fixtures" / "ncu"
KERNEL = "triton_poi_fused_add_mul_relu_0"

HEAD = '"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size","Device","CC","Section Name","Metric Name","Metric Unit","Metric Value","Rule Name","Rule Type","Rule Description","Estimated Speedup Type","Estimated Speedup"'


def _row(
    section: str, name: str, unit: str, value: str, rule=("", "", "", "", ""), kid: str = "0"
) -> str:
    cells = [
        kid,
        "4242",
        "python",
        "127.0.0.1",
        KERNEL,
        "1",
        "7",
        "(128, 1, 1)",
        "(8192, 1, 1)",
        "0",
        "9.0",
    ]
    cells += [section, name, unit, value, *rule]
    return ",".join(f'"{c}"' for c in cells)


SOL = "GPU Speed Of Light Throughput"
DETAILS_CSV = "\n".join(
    [
        "==PROF== Connected to process 4242",
        HEAD,
        _row(SOL, "DRAM Frequency", "hz", "2,619,000,000"),
        _row(SOL, "Memory Throughput", "%", "91.37"),
        _row(SOL, "Duration", "nsecond", "12,480"),
        _row(SOL, "Compute (SM) Throughput", "%", "18.02"),
        _row("Memory Workload Analysis", "Memory Throughput", "byte/second", "4,400,000,000,000"),
        _row("Launch Statistics", "Registers Per Thread", "register/thread", "18"),
        _row("Occupancy", "Achieved Occupancy", "%", "87.5"),
        _row(
            SOL,
            "",
            "",
            "",
            ("SOLBottleneck", "INF", "Memory is more heavily utilized than Compute.", "", ""),
        ),
        _row(
            "Memory Workload Analysis",
            "",
            "",
            "",
            (
                "MemoryCacheAccessPattern",
                "OPT",
                "The memory access pattern for global loads might not be optimal.",
                "global",
                "12.5",
            ),
        ),
        _row(
            "Occupancy",
            "",
            "",
            "",
            (
                "AchievedOccupancy",
                "OPT",
                "The difference between calculated theoretical and achieved occupancy can be the result of warp scheduling overheads.",
                "local",
                "3.1",
            ),
        ),
        _row(
            "Launch Statistics",
            "",
            "",
            "",
            (
                "TailEffect",
                "WRN",
                "A wave of thread blocks is only partially full.",
                "global",
                "25",
            ),
        ),
        _row(
            "Source Counters",
            "",
            "",
            "",
            (
                "UncoalescedGlobalAccess",
                "OPT",
                "This kernel has uncoalesced global accesses.",
                "global",
                "40.2",
            ),
        ),
        _row(SOL, "Duration", "nsecond", "99,999", kid="1"),  # a second kernel: ignored
    ]
)

DETAILS_TEXT = """\
  triton_poi_fused_add_mul_relu_0 (8192, 1, 1)x(128, 1, 1), Context 1, Stream 7, Device 0, CC 9.0
    Section: GPU Speed Of Light Throughput
    ----------------------- ----------- ------------
    Metric Name             Metric Unit Metric Value
    ----------------------- ----------- ------------
    Duration                    nsecond       12,480
    ----------------------- ----------- ------------

    INF   Memory is more heavily utilized than Compute: look at the Memory Workload Analysis section.

    Section: Launch Statistics
    OPT   Est. Speedup: 25%
          A wave of thread blocks is only partially full: the last wave
          runs 1024 blocks on 132 SMs.
    ----- --------------------------------------------------------------------------------------------------------------
    Section: Memory Workload Analysis
    WRN   The memory access pattern for loads from L1TEX to L2 is not optimal. Estimated Speedup: 40.5%
    OPT   Eviction hints are unused. Est. Local Speedup: 2%
  triton_per_fused_sum_1 (256, 1, 1)x(64, 1, 1), Context 1, Stream 7, Device 0, CC 9.0
    Section: Launch Statistics
    OPT   Est. Speedup: 99%
          Belongs to the second kernel.
"""

RAW_CSV = "\n".join(
    [
        '"ID","Kernel Name","gpu__time_duration.sum","sm__throughput.avg.pct_of_peak_sustained_elapsed","gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed","launch__registers_per_thread","sm__warps_active.avg.pct_of_peak_sustained_active","l1tex__t_sectors_pipe_lsu_mem_local_op_st.sum"',
        '"","","nsecond","%","%","register/thread","%","sector"',
        f'"0","{KERNEL}","2,000","55.5","40.25","40","30.5","128"',
    ]
)


def test_details_csv_distils_to_the_spec_fields_of_the_first_kernel():
    d = distill(details_csv=DETAILS_CSV)
    assert d.kernel_name == KERNEL
    assert d.duration_us == pytest.approx(12.48)
    assert d.sol_memory_pct == pytest.approx(91.37)  # the SOL section's %, not bytes/second
    assert d.sol_compute_pct == pytest.approx(18.02)
    assert d.registers_per_thread == 18
    assert d.achieved_occupancy_pct == pytest.approx(87.5)
    top = d.top_rules(3)
    assert len(top) == 3
    assert top[0].startswith("[Source Counters] This kernel has uncoalesced") and "40%" in top[0]
    assert "est. speedup 25%" in top[1] and "est. speedup 12%" in top[2]
    assert not any("more heavily utilized" in r for r in top)  # INF findings are not actionable


def test_text_rules_are_the_fallback_when_the_csv_has_no_rule_columns():
    rules = parse_rules_text(DETAILS_TEXT)
    assert [(r.kind, r.speedup_pct) for r in rules] == [
        ("INF", None),
        ("OPT", 25.0),
        ("WRN", 40.5),
        ("OPT", 2.0),
    ]
    assert rules[1].description.startswith("A wave of thread blocks is only partially full")
    assert "runs 1024 blocks" in rules[1].description
    csv_without_rules = "\n".join(line.rsplit(',"', 5)[0] for line in DETAILS_CSV.splitlines())
    d = distill(details_csv=csv_without_rules, details_text=DETAILS_TEXT)
    assert d.duration_us == pytest.approx(12.48)
    assert d.top_rules(2)[0].startswith("[Memory Workload Analysis] The memory access pattern")
    assert "Belongs to the second kernel" not in " ".join(d.top_rules(5))


def test_raw_page_fills_only_what_the_details_lack():
    d = distill_raw_csv(RAW_CSV)
    assert d.duration_us == pytest.approx(2.0)
    assert (d.sol_compute_pct, d.sol_memory_pct) == (55.5, 40.25)
    assert d.registers_per_thread == 40 and d.spills == 128
    assert d.achieved_occupancy_pct == pytest.approx(30.5)
    both = distill(details_csv=DETAILS_CSV, raw_csv=RAW_CSV)
    assert both.duration_us == pytest.approx(12.48) and both.spills == 128


def test_a_real_h200_report_distils_the_same_from_csv_and_text():
    """ncu 2025.3.1 exports of an Inductor persistent softmax kernel, captured by tests/e2e/test_gpu_search.py."""
    details_csv = (DATA / "h200_ncu_details.csv").read_text()
    details_text = (DATA / "h200_ncu_details.txt").read_text()
    raw_csv = (DATA / "h200_ncu_raw.csv").read_text()
    d = distill(details_csv, details_text, raw_csv)
    assert d.kernel_name == "triton_per_fused__softmax_exp_prepare_softmax_online_sub_0"
    assert d.duration_us == pytest.approx(9.408)
    assert (d.sol_compute_pct, d.sol_memory_pct) == (28.40, 40.47)
    assert d.registers_per_thread == 64
    assert d.spills == 0  # "Local Memory Spilling Requests"
    assert d.achieved_occupancy_pct == pytest.approx(34.03)
    top = d.top_rules(3)
    assert top[0].startswith("[Compute Workload Analysis] All compute pipelines are under-utilized")
    assert top[0].endswith("(est. speedup 83%)")
    assert [t.rsplit("est. speedup ", 1)[1] for t in top] == ["83%)", "59%)", "57%)"]
    assert not any("Sampling interval" in t for t in d.top_rules(20))  # profiler notes dropped
    # the text page carries the same findings as the CSV's rule rows
    from_text = {(r.kind, r.speedup_pct) for r in parse_rules_text(details_text)}
    assert from_text == {(r.kind, r.speedup_pct) for r in d.rules}
    raw = distill_raw_csv(raw_csv)
    assert raw.duration_us == pytest.approx(9.408)
    assert (raw.sol_compute_pct, raw.registers_per_thread) == (pytest.approx(28.40, abs=0.01), 64)
    assert (
        classify(
            KernelProfile(
                source="ncu", sol_compute_pct=d.sol_compute_pct, sol_memory_pct=d.sol_memory_pct
            )
        ).bottleneck
        == Bottleneck.UNDERUTILIZED
    )


@pytest.mark.parametrize(
    ("compute", "memory", "occupancy", "expected"),
    [
        (85.0, 10.0, None, Bottleneck.NEAR_OPTIMAL),
        (10.0, 80.5, None, Bottleneck.NEAR_OPTIMAL),
        (10.0, 80.0, None, Bottleneck.MEMORY_BOUND),  # "above 80%" is strict
        (30.0, 65.0, None, Bottleneck.MEMORY_BOUND),
        (70.0, 65.0, None, Bottleneck.COMPUTE_BOUND),
        (40.0, 35.0, 12.0, Bottleneck.UNDERUTILIZED),
        (None, None, None, Bottleneck.UNKNOWN),
    ],
)
def test_analyst_classes(compute, memory, occupancy, expected):
    profile = KernelProfile(
        source="ncu" if compute is not None else "events",
        sol_compute_pct=compute,
        sol_memory_pct=memory,
        achieved_occupancy_pct=occupancy,
    )
    analysis = classify(profile)
    assert analysis.bottleneck == expected
    assert analysis.advice
    if compute is not None:
        assert f"{compute:.1f}%" in analysis.reasoning
    if occupancy is not None:
        assert "occupancy is low" in analysis.reasoning


def test_ncu_command_line_follows_the_spec(tmp_path):
    cmd = profile_command("/x/ncu", tmp_path / "h.py", tmp_path / "rep", "triton_poi")
    text = " ".join(cmd)
    for part in (
        "--set full",
        "--clock-control none",
        "--replay-mode kernel",
        "--profile-from-start off",
        "--launch-count 1",
        "--kernel-name regex:triton_poi",
    ):
        assert part in text
    assert cmd[-5:] == [
        "-m",
        "kernelopt.profiling.harness_runner",
        str(tmp_path / "h.py"),
        "--mode",
        "ncu",
    ]
    # ncu launches a shell that execs the interpreter (sandboxed ncu could not launch a
    # venv's symlinked python itself); the shell hands every argument over unchanged
    shell = cmd.index("/bin/sh")
    assert cmd[shell : shell + 4] == ["/bin/sh", "-c", 'exec "$0" "$@"', sys.executable]
    probe = [*cmd[shell : shell + 4], "-c", "import sys; print(sys.argv[1:])", "a b", "$HOME"]
    out = subprocess.run(probe, capture_output=True, text=True, check=True).stdout
    assert out.strip() == "['a b', '$HOME']"


# --- the activity body end to end, with ncu absent / refused / faked -------------------------


def _profile_input(store, source: str, harness_text: str | None = None) -> ProfileInput:
    src = store.put_text(source, name="kernel.py")
    compiled = stub_compiled(ProblemSpec(name="p", source=src), src, "g", mode="m", ms=1.0)
    spec = TensorSpec(shape=[256, 4096], stride=[4096, 1], dtype="float32")
    args = [
        KernelArg(name="in_ptr0", tensor=spec),
        KernelArg(name="in_ptr1", tensor=TensorSpec(shape=[4096], stride=[1], dtype="float32")),
        KernelArg(name="out_ptr0", tensor=spec),
        KernelArg(name="xnumel", value=1048576),
    ]
    kernel = TritonKernel(
        name=KERNEL,
        source=src,
        launch_line=10,
        launch_site="...",
        launches=[KernelLaunch(line=10, site="...", args=args)],
    )
    segment = SegmentResult(
        kernels=[kernel], library_calls=[], mode=SearchMode.MULTI, mode_reason="", targets=[]
    )
    target = SearchTarget(id="k0", kind=TargetKind.KERNEL, kernels=[KERNEL], source=src)
    harness = store.put_text(harness_text, name="h.py") if harness_text else None
    return ProfileInput(
        compiled=compiled, segment=segment, target=target, source=src, harness=harness, timeout_s=60
    )


@pytest.fixture
def store(tmp_path):
    return open_store(tmp_path / "artifacts")


def test_harness_candidates_best_first(store, tmp_path):
    inp = _profile_input(store, POINTWISE)
    found, missing = candidate_harnesses(inp, store, tmp_path / "h")
    assert [how for _, how in found] == ["captured", "built"]
    assert missing == []
    captured = found[0][0].read_text()
    assert "KernelHarness(compiled, open_store()).kernel(KERNEL)" in captured
    assert f"KERNEL = {KERNEL!r}" in captured and "IS_ROOT = True" in captured
    built = found[1][0].read_text()
    assert is_self_harness(built) and is_self_harness(captured)
    namespace: dict = {}
    exec(compile(built.split("def _module")[0], "built", "exec"), namespace)  # header only
    assert [a["name"] for a in namespace["ARGS"]] == ["in_ptr0", "in_ptr1", "out_ptr0", "xnumel"]
    assert namespace["ARGS"][3]["value"] == 1048576
    assert Path(namespace["SOURCE"]).read_text() == POINTWISE
    # a non-root state is launched from its own source, not the captured kernel object
    child = inp.model_copy(update={"source": store.put_text(POINTWISE + "\n# pinned\n")})
    found, _ = candidate_harnesses(child, store, tmp_path / "h2")
    assert "IS_ROOT = False" in found[0][0].read_text()


def test_a_launch_record_without_layouts_builds_no_harness(store, tmp_path):
    inp = _profile_input(store, POINTWISE)
    kernel = inp.segment.kernels[0]
    launch = kernel.launches[0]
    args = [launch.args[0].model_copy(update={"tensor": None}), *launch.args[1:]]
    blind = kernel.model_copy(update={"launches": [launch.model_copy(update={"args": args})]})
    inp = inp.model_copy(update={"segment": inp.segment.model_copy(update={"kernels": [blind]})})
    found, missing = candidate_harnesses(inp, store, tmp_path / "h")
    assert [how for _, how in found] == ["captured"]
    assert missing == ["the launch record lacks the layout of in_ptr0"]


def test_no_runnable_harness_is_a_note(store):
    """On this CPU machine neither the captured nor the built harness can run (no CUDA)."""
    result = profile_target(_profile_input(store, POINTWISE), store)
    assert result.profile.source == "none"
    assert "captured harness: harness failed" in result.profile.note
    assert "built harness: harness failed" in result.profile.note
    assert result.analysis.bottleneck == Bottleneck.UNKNOWN


HARNESS_CPU = "def get_args():\n    return [0]\n\ndef call(args):\n    args[0] += 1\n"


def test_missing_ncu_falls_back_to_event_timing_with_a_note(store, monkeypatch, tmp_path):
    monkeypatch.setenv("KERNELOPT_NCU", str(tmp_path / "no-such-ncu"))
    result = profile_target(_profile_input(store, POINTWISE, HARNESS_CPU), store)
    assert result.profile.source == "events"
    assert result.profile.duration_us is not None and result.profile.duration_us >= 0
    assert result.profile.note == "event timing only (given harness): ncu not found"
    assert result.analysis.bottleneck == Bottleneck.UNKNOWN
    assert result.gpu_seconds > 0


def _fake_ncu(tmp_path: Path, body: str) -> Path:
    (tmp_path / "details.csv").write_text(DETAILS_CSV)
    (tmp_path / "details.txt").write_text(DETAILS_TEXT)
    (tmp_path / "raw.csv").write_text(RAW_CSV)
    script = tmp_path / "ncu"
    script.write_text(
        f"#!{sys.executable}\nimport sys, pathlib\nDATA = pathlib.Path({str(tmp_path)!r})\n{body}"
    )
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return script


def test_counter_permission_denied_is_a_note_not_a_failure(store, monkeypatch, tmp_path):
    ncu = _fake_ncu(
        tmp_path,
        "print('==ERROR== ERR_NVGPUCTRPERM - The user does not have permission to access NVIDIA GPU Performance Counters')\nsys.exit(1)\n",
    )
    monkeypatch.setenv("KERNELOPT_NCU", str(ncu))
    result = profile_target(_profile_input(store, POINTWISE, HARNESS_CPU), store)
    assert result.profile.source == "events"
    assert "no permission for GPU performance counters" in result.profile.note


def test_a_report_from_ncu_is_distilled_and_stored(store, monkeypatch, tmp_path):
    body = (
        "args = sys.argv[1:]\n"
        "if '--import' in args:\n"
        "    page = args[args.index('--page') + 1]\n"
        "    name = 'raw.csv' if page == 'raw' else ('details.csv' if '--csv' in args else 'details.txt')\n"
        "    sys.stdout.write((DATA / name).read_text())\n"
        "else:\n"
        "    stem = args[args.index('--export') + 1]\n"
        "    pathlib.Path(stem + '.ncu-rep').write_bytes(b'NCU-REPORT ' + ' '.join(args).encode())\n"
    )
    monkeypatch.setenv("KERNELOPT_NCU", str(_fake_ncu(tmp_path, body)))
    result = profile_target(_profile_input(store, POINTWISE, HARNESS_CPU), store)
    p = result.profile
    assert p.source == "ncu"
    assert p.duration_us == pytest.approx(12.48)
    assert (p.sol_compute_pct, p.sol_memory_pct) == (18.02, 91.37)
    assert p.spills == 128  # from the raw page
    assert len(p.top_rules) == 3
    assert "given harness" in p.note and "events median" in p.note
    assert result.analysis.bottleneck == Bottleneck.NEAR_OPTIMAL
    raw = store.get_bytes(p.raw_report)
    assert raw.startswith(b"NCU-REPORT") and b"--set full" in raw and b"--clock-control none" in raw
    assert f"--kernel-name regex:{KERNEL}".encode() in raw  # the state defines the target kernel


def test_harness_runner_rejects_a_module_without_the_protocol(tmp_path):
    from kernelopt.profiling.harness_runner import load_harness

    bad = tmp_path / "bad.py"
    bad.write_text("x = 1\n")
    with pytest.raises(AttributeError, match="no get_args"):
        load_harness(bad)
    good = tmp_path / "good.py"
    good.write_text(HARNESS_CPU)
    assert load_harness(good).get_args() == [0]
