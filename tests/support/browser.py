"""Look at an HTML page the way a person does: headless Chromium, then measure what it drew.

No Python browser driver is needed: a small script is added to a copy of the page,
Chromium loads it (``--dump-dom``), the script measures the laid-out page (images
loaded and their size, legend boxes against plot axes, table cells whose text
spills out, font sizes) and writes the findings as JSON into the DOM, which
Chromium prints.  ``chromium()`` is None where no Chromium is installed.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "chrome")

MEASURE = r"""
<script>
window.addEventListener('load', () => {
  const out = {width: window.innerWidth, images: [], nodata: [], cells: 0,
               spilled: [], small_fonts: 0, page_scroll_x: 0};
  for (const img of document.querySelectorAll('img')) {
    const r = img.getBoundingClientRect();
    const rec = {alt: img.alt, loaded: img.complete && img.naturalWidth > 0,
                 w: r.width, h: r.height, right: r.right, overlaps: []};
    const legend = (img.dataset.legend || '').split(',').filter(Boolean).map(Number);
    const axes = (img.dataset.axes || '').split(';').filter(Boolean)
                   .map(b => b.split(',').map(Number));
    if (legend.length === 4) {
      const L = [legend[0]*r.width, legend[1]*r.height, legend[2]*r.width, legend[3]*r.height];
      for (const b of axes) {
        const A = [b[0]*r.width, b[1]*r.height, b[2]*r.width, b[3]*r.height];
        const ix = Math.min(L[2], A[2]) - Math.max(L[0], A[0]);
        const iy = Math.min(L[3], A[3]) - Math.max(L[1], A[1]);
        if (ix > 0.5 && iy > 0.5) rec.overlaps.push([ix, iy]);
      }
    }
    rec.has_boxes = axes.length > 0;
    out.images.push(rec);
  }
  for (const p of document.querySelectorAll('.nodata')) {
    out.nodata.push({text: p.textContent, visible: p.offsetHeight > 0});
  }
  for (const cell of document.querySelectorAll('td, th')) {
    out.cells += 1;
    if (cell.scrollWidth > cell.clientWidth + 1) out.spilled.push(cell.textContent.slice(0, 60));
    if (parseFloat(getComputedStyle(cell).fontSize) < 11) out.small_fonts += 1;
  }
  out.page_scroll_x = document.scrollingElement.scrollWidth - window.innerWidth;
  const pre = document.createElement('pre');
  pre.id = 'kernelopt-measured';
  pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
});
</script>
"""


def chromium() -> str | None:
    """The first Chromium-family browser on PATH, or None."""
    for name in NAMES:
        found = shutil.which(name)
        if found:
            return found
    return None


def measure(
    page: Path, browser: str, workdir: Path, width: int = 1280, height: int = 900
) -> dict[str, Any]:
    """Load a copy of ``page`` with the measuring script (written to ``workdir``; relative
    links still resolve next to ``page``) and return what the script found."""
    text = page.read_text(encoding="utf-8")
    base = f'<base href="{page.resolve().parent.as_uri()}/">'
    text = re.sub(r"<head>", "<head>" + base, text, count=1, flags=re.I)
    probe = Path(workdir) / (page.stem + ".measured.html")
    probe.write_text(text.replace("</body>", MEASURE + "</body>"), encoding="utf-8")
    done = subprocess.run(
        [
            browser,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--allow-file-access-from-files",
            f"--window-size={width},{height}",
            "--virtual-time-budget=10000",
            "--dump-dom",
            probe.resolve().as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    found = re.search(r'<pre id="kernelopt-measured">(.*?)</pre>', done.stdout, re.S)
    if not found:
        raise RuntimeError(f"Chromium printed no measurements: {done.stderr[-2000:]}")
    raw = found.group(1).replace("&quot;", '"').replace("&lt;", "<").replace("&gt;", ">")
    return json.loads(raw.replace("&amp;", "&"))
