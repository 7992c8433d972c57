"""The reply folder as a user's `kernelopt pending` sees it while a worker moves files."""

from __future__ import annotations

import json
from pathlib import Path

from kernelopt.agents import reply_folder


def test_pending_skips_a_request_moved_away_while_it_lists(tmp_path: Path) -> None:
    """A worker moves a request to ``answered`` once its reply is taken; a listing that
    saw the name a moment before must skip it, not fail (a dangling link stands in for
    a file that vanished between the listing and its stat)."""
    f = reply_folder.folders(tmp_path)
    f.requests.mkdir(parents=True)
    (f.requests / "r1.json").write_text(json.dumps({"request_id": "r1"}))
    (f.requests / "r2.json").symlink_to(tmp_path / "moved-away.json")
    waiting = reply_folder.pending(f)
    assert [r["request_id"] for r in waiting] == ["r1"]
    assert waiting[0]["age_s"] >= 0
