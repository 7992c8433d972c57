"""``kernelopt triage FILE [--json] [--mode auto|single|multi]``.

Answers, before any GPU-hours are spent, how much of a model Triton work can
touch: compile (cached), segment, measure per-kernel GPU time, and print the
library fraction f, the Amdahl ceilings, the verdict and the search order (with
each target's bandwidth headroom against the speedup gamma needs of it).  Runs without
Temporal; the GPU steps run in a supervised child process, as in a campaign,
so this process never creates a CUDA context.
"""

from __future__ import annotations

import asyncio
import json
import math
from pathlib import Path
from typing import TYPE_CHECKING

from kernelopt.contracts.compiled import (
    CompileInput,
    CompileResult,
    SearchMode,
    SegmentInput,
    SegmentResult,
    TriageInput,
    TriageResult,
)
from kernelopt.contracts.data_movement import required_speedup
from kernelopt.contracts.problem import ProblemSpec
from kernelopt.errors import KernelOptError
from kernelopt.kinds.registry import check_problem_file
from kernelopt.store import ArtifactStore, open_store

if TYPE_CHECKING:
    from rich.table import Table

TARGETS_SHOWN = 20  # search-order rows before the rest is counted


async def run_triage(
    path: Path, mode: SearchMode, store: ArtifactStore, seed: int = 0
) -> tuple[CompileResult, SegmentResult, TriageResult]:
    """Compile -> segment -> triage for one problem file (GPU steps supervised)."""
    from activities.supervise import run_supervised
    from kernelopt.compile.segment import segment
    from kernelopt.pyfile import read_source

    source = store.put_text(read_source(path), media_type="text/x-python", name=path.name)
    spec = ProblemSpec(name=path.stem, source=source, path=str(path), seed=seed)
    # both time the GPU (autotuning, triage's profile): exclusive, as on a GPU worker
    compiled = await run_supervised(
        "kernelopt.kinds.registry:compile_problem",
        CompileInput(problem=spec),
        CompileResult,
        lease="exclusive",
    )
    seg = segment(SegmentInput(compiled=compiled, mode=mode), store)
    tri = await run_supervised(
        "kernelopt.compile.triage:triage",
        TriageInput(compiled=compiled, segment=seg),
        TriageResult,
        lease="exclusive",
    )
    return compiled, seg, tri


def _fmt(x: float | None, digits: int = 3) -> str:
    if x is None:
        return "-"
    if math.isinf(x) or x >= 1e6:
        return "unbounded"
    return f"{x:.{digits}f}"


def kernel_table(tri: TriageResult, width: int) -> Table:
    """Per-kernel GPU time; kernel names whole (folded, never cut), numbers never wrapped.

    Below 100 columns the standalone time goes, so the names keep room to be read.
    """
    from rich.table import Table

    columns = ["kernel", "kind", "launches", "ms", "share"]
    if width >= 100:
        columns.append("alone ms")
    table = Table(title="GPU time per forward")
    for col in columns:
        if col == "kernel":
            table.add_column(col, overflow="fold", ratio=1)
        else:
            table.add_column(col, no_wrap=True, justify="left" if col == "kind" else "right")
    total = tri.total_ms or 1.0
    for k in tri.per_kernel:
        cells = [
            k.name,
            "library" if k.is_library else "triton",
            str(k.launches),
            _fmt(k.ms, 4),
            f"{100 * k.ms / total:.1f}%",
            _fmt(k.standalone_ms, 4),
        ]
        table.add_row(*cells[: len(columns)])
    return table


def target_table(tri: TriageResult) -> Table:
    """The searched targets in search order: share, the speedup gamma needs, bandwidth headroom.

    A target short of headroom is marked where it stands (last); the reason follows the table.
    """
    from rich.table import Table

    table = Table(title=f"Search order ({len(tri.targets)} searched)")
    table.add_column("#", no_wrap=True, justify="right")
    table.add_column("target", overflow="fold", ratio=1)
    for col in ("share", "needs", "headroom"):
        table.add_column(col, no_wrap=True, justify="right")
    rooms = {r.target: r for r in tri.headroom}
    for i, target in enumerate(tri.targets[:TARGETS_SHOWN], 1):
        need = required_speedup(target.share, tri.gamma)
        room = rooms.get(target.id)
        headroom = "-"
        if room is not None and room.headroom is not None:
            headroom = f"{room.headroom:.2f}x" + (" short" if room.short else "")
        needs = f"{need:.3f}x" if need is not None else "-"
        table.add_row(str(i), target.id, f"{target.share:.1%}", needs, headroom)
    rest = len(tri.targets) - TARGETS_SHOWN
    if rest > 0:
        table.add_row("...", f"{rest} more searched targets", "", "", "")
    return table


def headroom_lines(tri: TriageResult) -> list[str]:
    """The headroom rule in words, then why each target short of headroom is searched last."""
    lines = [f"bandwidth headroom: {tri.headroom_rule}"] if tri.headroom_rule else []
    lines += [f"  {r.target}: {r.reason}" for r in tri.headroom if r.short]
    return lines


def render(compiled: CompileResult, seg: SegmentResult, tri: TriageResult) -> None:
    from rich.console import Console

    console = Console()
    console.print(
        f"[bold]{compiled.problem.name}[/]  mode {compiled.mode}  "
        f"{compiled.gpu_name}  torch {compiled.torch_version} / triton {compiled.triton_version}"
        f"{'  (cached compile)' if compiled.cache_hit else ''}"
    )
    console.print(
        f"eager {_fmt(compiled.eager_ms)} ms | compiled {_fmt(compiled.compiled_ms)} ms | "
        f"default mode {_fmt(compiled.default_mode_ms)} ms | wrapper {_fmt(compiled.wrapper_ms)} ms"
    )
    console.print(f"search mode: [bold]{seg.mode.value}[/] ({seg.mode_reason})")
    console.print(kernel_table(tri, console.width))
    ceil = "  ".join(f"S={key}: {_fmt(v)}x" for key, v in tri.ceilings.items())
    console.print(
        f"library fraction f = [bold]{tri.library_fraction:.3f}[/]  "
        f"(library {_fmt(tri.library_ms, 4)} ms, triton {_fmt(tri.triton_ms, 4)} ms)"
    )
    console.print(f"Amdahl ceiling: {ceil}")
    console.print(
        f"Triton speedup needed for gamma={tri.gamma}: {_fmt(tri.required_speedup, 2)}  "
        f"verdict: [bold]{tri.verdict}[/] -- {tri.verdict_reason}"
    )
    if tri.targets:
        console.print(target_table(tri))
    if tri.cutoff:
        console.print(f"search cut-off: {tri.cutoff}", highlight=False)
    for line in headroom_lines(tri):
        console.print(line, highlight=False)


def _has_gpu() -> bool:
    """Asked without a CUDA context here (``nvidia-smi``): the GPU steps run in a child."""
    import os

    from kernelopt.gpu_info import gpu_names

    if os.environ.get("CUDA_VISIBLE_DEVICES") == "":  # set but empty: CUDA sees no device
        return False
    return bool(gpu_names())


def one_line(exc: BaseException) -> str:
    """A child's failure as one line: its message, without the traceback it carries.

    The supervisor's ApplicationError reads "NoGpuError: <message>\n<traceback>" and
    its type is "NoGpuError" again; a person needs the message once.
    """
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    kind = getattr(exc, "type", None) or type(exc).__name__
    while text.startswith(f"{kind}: "):
        text = text.removeprefix(f"{kind}: ")
    return f"{kind}: {text}"


def triage_command(path: Path | str, json_out: bool, mode: str) -> int:
    """CLI body: 0 on success, 2 for a bad problem file or a failed step."""
    from rich.console import Console

    from kernelopt.preflight_problem import preflight

    path = Path(path)
    try:
        check_problem_file(path)
        search_mode = SearchMode(mode)
        # import and build it once on the CPU, time-limited; triage compiles one shape
        preflight(path, one_shape=True)
    except (KernelOptError, ValueError) as exc:
        Console(stderr=True).print(f"[red]error:[/] {exc}", highlight=False)
        return 2
    if not _has_gpu():
        Console(stderr=True).print(
            "[red]triage:[/] no CUDA GPU here: triage measures each kernel's GPU time, so it "
            "runs on a GPU host (`kernelopt optimize` here submits a campaign that waits for one)",
            highlight=False,
        )
        return 2
    try:
        compiled, seg, tri = asyncio.run(run_triage(path, search_mode, open_store()))
    except Exception as exc:  # the child's typed failure arrives as an ApplicationError
        Console(stderr=True).print(f"[red]triage failed:[/] {one_line(exc)}", highlight=False)
        return 2
    if json_out:
        print(
            json.dumps(
                {
                    "problem": compiled.problem.name,
                    "compile": compiled.model_dump(mode="json"),
                    "segment": {
                        "mode": seg.mode.value,
                        "mode_reason": seg.mode_reason,
                        "kernels": [k.name for k in seg.kernels],
                        "library_calls": [c.name for c in seg.library_calls],
                        "fusion_groups": [g.kernels for g in seg.fusion_groups],
                    },
                    "triage": tri.model_dump(mode="json"),
                },
                indent=2,
            )
        )
    else:
        render(compiled, seg, tri)
    return 0
