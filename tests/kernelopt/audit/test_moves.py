"""The state-move journal: which moves belong to a campaign, and how the audit shows them."""

from __future__ import annotations

import io

from rich.console import Console

from kernelopt.audit.html import render_html
from kernelopt.audit.model import AuditReport
from kernelopt.audit.moves import StateMove, moves_during, read_moves, record_move
from kernelopt.audit.render import print_report
from kernelopt.store import ArtifactStore, LocalBackend


def move(lost: str, resumed: str, to: str = "b:/home") -> StateMove:
    return StateMove(
        archive_sha256="ab" * 32,
        exported_at=resumed,
        exported_from="a:/home",
        source_server="lost",
        last_write_at=lost,
        imported_at=resumed,
        imported_to=to,
    )


def test_the_journal_keeps_every_move_in_order(tmp_path) -> None:
    store = ArtifactStore(LocalBackend(tmp_path / "artifacts"))
    assert read_moves(store) == []
    first = move("2026-12-01T10:00:00+00:00", "2026-12-01T10:05:00+00:00", to="b:/h")
    second = move("2026-12-01T11:00:00+00:00", "2026-12-01T11:05:00+00:00", to="c:/h")
    record_move(store, first)
    record_move(store, second)
    assert read_moves(store) == [first, second]


def test_only_moves_inside_the_campaign_belong_to_it() -> None:
    before = move("2026-12-01T08:00:00+00:00", "2026-12-01T08:10:00+00:00")
    during = move("2026-12-01T10:00:00+00:00", "2026-12-01T10:05:00+00:00")
    after = move("2026-12-01T13:00:00+00:00", "2026-12-01T13:05:00+00:00")
    moves = [before, during, after]
    start, end = "2026-12-01T09:00:00+00:00", "2026-12-01T12:00:00+00:00"
    assert moves_during(moves, start, end) == [during]
    assert moves_during(moves, start, "") == [during, after]  # still running


def test_the_audit_shows_the_loss_and_the_resume() -> None:
    report = AuditReport(
        campaign_id="c1",
        moves=[move("2026-12-01T10:00:00+00:00", "2026-12-01T10:05:00+00:00", to="b:/h2")],
    )
    console = Console(file=io.StringIO(), width=200, record=True)
    print_report(report, console)
    text = console.export_text()
    assert "machine lost" in text and "state resumed" in text and "b:/h2" in text
    html = render_html(report)
    assert "Machine moves" in html and "b:/h2" in html and "abababababab" in html
