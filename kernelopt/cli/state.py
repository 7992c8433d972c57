"""``kernelopt state export FILE`` / ``kernelopt state import FILE``: a campaign moves machines.

The work is ``kernelopt.state_transfer``; this module parses and prints what
was written or restored, and the next step on the new machine.
"""

from __future__ import annotations

import argparse
import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from rich.progress import (
    BarColumn,
    DownloadColumn,
    Progress,
    TaskID,
    TextColumn,
    TransferSpeedColumn,
)
from rich.table import Table

from kernelopt.cli import output
from kernelopt.config import Settings
from kernelopt.errors import KernelOptError

if TYPE_CHECKING:
    from kernelopt.state_transfer import PhaseProgress


def add_parser(sub: argparse._SubParsersAction) -> None:
    state = sub.add_parser(
        "state",
        help="move a campaign's state (server database, artifact store) between machines",
    )
    actions = state.add_subparsers(dest="state_action", required=True)
    exp = actions.add_parser(
        "export",
        help="write the state of $KERNELOPT_HOME to one archive (safe while the server runs)",
    )
    exp.add_argument("file", type=Path)
    exp.add_argument(
        "--store-only",
        action="store_true",
        help="the artifact store and results only (production: histories live in the cluster)",
    )
    exp.add_argument(
        "--thin",
        action="store_true",
        help="leave out the tensors an import draws again from each problem's seed (checked "
        "here first) and the compiles' reference outputs: an archive of MiBs, not GiBs",
    )
    caches = exp.add_mutually_exclusive_group()
    caches.add_argument(
        "--compiler-caches",
        dest="compiler_caches",
        action="store_const",
        const="all",
        default="autotune",
        help="all of the GPU workers' Triton and Inductor caches (GiBs), not only their "
        "autotuning results (KiBs, carried by default): for large models whose compile would "
        "not fit the next machine's loan; imported only under the same torch and triton",
    )
    caches.add_argument(
        "--no-autotune-results",
        dest="compiler_caches",
        action="store_const",
        const="none",
        help="leave even the autotuning results behind (the next machine benchmarks again)",
    )
    imp = actions.add_parser(
        "import", help="restore an archive into $KERNELOPT_HOME (its digests checked first)"
    )
    imp.add_argument("file", type=Path)
    imp.add_argument(
        "--force",
        action="store_true",
        help="replace state already in the home; compiler caches of other torch/triton "
        "versions are then left out instead of refusing",
    )
    imp.add_argument(
        "--store-only", action="store_true", help="restore the files, not the server database"
    )


def cmd_state(args: argparse.Namespace, settings: Settings) -> int:
    from kernelopt.state_transfer import export_state, human_bytes, import_state
    from kernelopt.thin_home import export_thin, redraw_left_out

    notes = []
    if args.state_action == "export" and args.thin:
        if args.store_only:
            raise KernelOptError("--thin and --store-only do not go together")
        with _phases() as progress:
            thin = export_thin(
                settings, args.file, compiler_caches=args.compiler_caches, progress=progress
            )
        report, verb = thin.report, "exported"
        notes.append(f"thin: {len(thin.plan.left_out)} blob(s) left out, drawn again on import")
    elif args.state_action == "export":
        with _phases() as progress:
            report = export_state(
                settings,
                args.file,
                store_only=args.store_only,
                compiler_caches=args.compiler_caches,
                progress=progress,
            )
        verb = "exported"
    else:
        report = import_state(settings, args.file, force=args.force, store_only=args.store_only)
        verb = "restored"
        if report.manifest.left_out:
            redrawn = redraw_left_out(settings)
            notes.append(
                f"thin archive: {redrawn.blobs} tensor blob(s) drawn again to their recorded "
                f"digests ({redrawn.seconds:.1f} s)"
            )
    m = report.manifest
    table = Table(title=f"{verb}: {report.archive} (sha256 {report.archive_sha256[:12]})")
    for col in ("part", "files", "bytes"):
        table.add_column(col, justify="left" if col == "part" else "right")
    for part in report.parts:
        table.add_row(part.part, str(part.files), f"{part.bytes:,}")
    output.console.print(table)
    total = sum(p.bytes for p in report.parts)
    files = sum(p.files for p in report.parts)
    size = report.archive.stat().st_size if report.archive.is_file() else 0
    output.console.print(
        f"total {files:,} file(s), {human_bytes(total)}; archive {human_bytes(size)}",
        highlight=False,
    )
    output.console.print(
        f"source {m.source}, server {m.server}, last write {m.last_write_at}, "
        f"kernelopt {m.kernelopt_version}, temporal {m.temporal_cli_version}",
        highlight=False,
        soft_wrap=True,
    )
    for note in [*report.notes, *notes]:
        output.console.print(note, highlight=False, soft_wrap=True)
    for warning in report.warnings:
        output.err_console.print(f"[yellow]warning:[/] {warning}", highlight=False, soft_wrap=True)
    if verb == "restored" and m.kind == "full" and not args.store_only:
        output.console.print(
            "next: `kernelopt server start`, then the workers (`kernelopt worker --queue cpu`, "
            "`kernelopt worker --queue gpu --gpu N`): open campaigns continue where they stopped",
            highlight=False,
            soft_wrap=True,
        )
    return 0


@contextlib.contextmanager
def _phases() -> Iterator[PhaseProgress]:
    """A progress bar per export phase (database, state files, compiler caches) on stderr."""
    with Progress(
        TextColumn("{task.description:<16}"),
        BarColumn(),
        DownloadColumn(binary_units=True),
        TransferSpeedColumn(),
        console=output.err_console,
        transient=False,
    ) as bar:
        tasks: dict[str, TaskID] = {}

        def progress(phase: str, done: int, total: int) -> None:
            if phase not in tasks:
                tasks[phase] = bar.add_task(phase, total=total)
            bar.update(tasks[phase], advance=done, total=total)

        yield progress


__all__ = ["add_parser", "cmd_state"]
