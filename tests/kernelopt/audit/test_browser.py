"""What a person sees in the audit and report pages, measured in headless Chromium (issue 26, 11).

Skipped where no Chromium is installed (``apt-get install chromium``); CI does not
install one, so this runs where a browser is at hand.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from kernelopt.audit.html import PLOT_TITLES, render_html
from tests.kernelopt.audit.test_collect import audit
from tests.kernelopt.audit.test_html_page import not_started
from tests.support.browser import chromium, measure
from tests.support.paths import ROOT

BROWSER = chromium()
pytestmark = pytest.mark.skipif(
    BROWSER is None, reason="no headless Chromium on PATH (apt-get install chromium to run it)"
)


def _readable(found: dict) -> None:
    assert found["cells"] > 0
    assert found["spilled"] == [], found["spilled"]  # no cell's text runs out of its box
    assert found["small_fonts"] == 0
    assert found["page_scroll_x"] <= 0, found  # nothing wider than the window


@pytest.mark.parametrize("width", [1280, 800])
def test_audit_page_plots_load_fit_and_keep_legends_off_the_curves(
    tmp_path: Path, width: int
) -> None:
    page = tmp_path / "audit.html"
    page.write_text(render_html(audit("llm")), encoding="utf-8")
    found = measure(page, BROWSER, tmp_path, width=width)
    assert len(found["images"]) == len(PLOT_TITLES) and found["nodata"] == []
    for img in found["images"]:
        assert img["loaded"] and img["has_boxes"], img
        assert img["w"] >= 300 and img["right"] <= found["width"], img
        assert img["overlaps"] == [], img
    _readable(found)


def test_the_overlap_check_sees_a_legend_drawn_over_the_axes(tmp_path: Path) -> None:
    """The measurement can fail: a legend box inside the plot area is reported."""
    html = re.sub(
        r"data-legend='[^']+'", "data-legend='0.2,0.2,0.4,0.4'", render_html(audit("llm")), count=1
    )
    page = tmp_path / "bad.html"
    page.write_text(html, encoding="utf-8")
    found = measure(page, BROWSER, tmp_path)
    assert found["images"][0]["overlaps"], found["images"][0]


def test_a_campaign_that_has_not_started_shows_no_empty_plots(tmp_path: Path) -> None:
    page = tmp_path / "audit.html"
    page.write_text(render_html(not_started()), encoding="utf-8")
    found = measure(page, BROWSER, tmp_path)
    assert found["images"] == []
    assert len(found["nodata"]) == len(PLOT_TITLES) and all(n["visible"] for n in found["nodata"])
    _readable(found)


def test_the_committed_suite_report_loads_its_plots_and_reads_well(tmp_path: Path) -> None:
    found = measure(ROOT / "docs" / "results" / "h200" / "report.html", BROWSER, tmp_path)
    assert len(found["images"]) >= 3
    for img in found["images"]:
        assert img["loaded"] and img["w"] >= 300 and img["right"] <= found["width"], img
    _readable(found)
