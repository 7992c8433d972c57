"""How a search's decisions and ledger are cut into archive pages (pure, deterministic).

A page is an activity input, so it lands in the history whole: pages are cut
by count and by serialized size, so none comes near Temporal's payload limits
however long the search or however wordy its verdicts and plans.
"""

from __future__ import annotations

from kernelopt.contracts.search import Decision, LedgerEntry

PAGE_ITEMS = 100  # decisions plus ledger entries per page
PAGE_BYTES = 128 * 1024  # serialized decisions plus ledger entries per page


def item_bytes(item: Decision | LedgerEntry) -> int:
    return len(item.model_dump_json())


def log_bytes(decisions: list[Decision], ledger: list[LedgerEntry]) -> int:
    return sum(item_bytes(i) for i in decisions) + sum(item_bytes(i) for i in ledger)


def due(decisions: list[Decision], ledger: list[LedgerEntry], final: bool = False) -> bool:
    """Whether the carried log is paged out now (at an iteration boundary, or at the end)."""
    if not decisions and not ledger:
        return False
    if final or len(decisions) + len(ledger) >= PAGE_ITEMS:
        return True
    return log_bytes(decisions, ledger) >= PAGE_BYTES


def cut_pages(
    decisions: list[Decision],
    ledger: list[LedgerEntry],
    max_items: int = PAGE_ITEMS,
    max_bytes: int = PAGE_BYTES,
) -> list[tuple[list[Decision], list[LedgerEntry]]]:
    """Consecutive pages, in order, each within both limits (an oversized item alone)."""
    items: list[Decision | LedgerEntry] = [*decisions, *ledger]
    pages: list[list[Decision | LedgerEntry]] = []
    page: list[Decision | LedgerEntry] = []
    size = 0
    for item in items:
        n = item_bytes(item)
        if page and (len(page) >= max_items or size + n > max_bytes):
            pages.append(page)
            page, size = [], 0
        page.append(item)
        size += n
    if page:
        pages.append(page)
    return [
        (
            [i for i in p if isinstance(i, Decision)],
            [i for i in p if isinstance(i, LedgerEntry)],
        )
        for p in pages
    ]
