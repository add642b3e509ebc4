"""Renders the docs site's key pages in headless Chromium at a desktop and a phone width and fails
when a code block or a table overflows its column, or a name in a table breaks across lines.

    .venv/bin/python scripts/check_pages.py                 # builds the site into a temporary folder
    .venv/bin/python scripts/check_pages.py --site SITE     # a site already built (mkdocs build -d SITE)

Needs a Chromium (Debian: ``apt-get install chromium``; ``--chromium PATH`` for another). The site
is served on a loopback port; each page is copied with a script that measures it once loaded, and
shown in a frame of the width measured (a headless window has a minimum width above a phone's);
Chromium prints the outer page's DOM, where the frame wrote its measurements. Per page and width it
reports the content column's width, the code blocks whose text is wider than their box (clipped, to
be scrolled), the tables wider than the column and not inside a scrolling box, the names (``code``
or links in table cells) broken over lines, and how much each picture is scaled down (a picture
drawn at 1,600 px and shown at 700 has its text at 0.44 of its size). Exit status 1 when anything
overflows or breaks (pictures are reported, not judged).
"""
from __future__ import annotations

import argparse
import contextlib
import functools
import html
import http.server
import json
import re
import shutil
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WIDTHS = (1280, 390)
PAGES = ("index.html", "install/index.html", "guides/offline/index.html", "guides/ros2/index.html",
         "guides/training/index.html", "reference/cli/index.html", "results/index.html",
         "results/ogbench/index.html", "models/PointMaze_Large-v3/index.html",
         "models/pointmaze-large-stitch/index.html", "models/FetchBoxDistractor-v0/index.html")

MEASURE = """<script>
window.addEventListener("load", () => {
  const column = document.querySelector(".md-content__inner") || document.body;
  // The content area, padding included: Material lets a table's scrolling box reach into it.
  const edge = (document.querySelector(".md-content") || column).getBoundingClientRect().right + 1;
  const out = {column: Math.round(column.getBoundingClientRect().width), code: [], tables: [], scrolling: 0,
               broken: [], pictures: []};
  for (const block of column.querySelectorAll("pre > code")) {
    if (block.scrollWidth > block.clientWidth + 1)
      out.code.push([block.textContent.trim().split("\\n")[0].slice(0, 70), block.scrollWidth - block.clientWidth]);
  }
  for (const table of column.querySelectorAll("table")) {
    let box = null;
    for (let e = table.parentElement; e && e !== column; e = e.parentElement) {
      const x = getComputedStyle(e).overflowX;
      if (x === "auto" || x === "scroll") { box = e; break; }
    }
    const right = (box || table).getBoundingClientRect().right;
    const head = table.querySelector("th") ? table.querySelector("th").textContent.trim().slice(0, 40) : "";
    if (right > edge) out.tables.push([head, Math.round(right - edge)]);
    else if (box && box.scrollWidth > box.clientWidth + 1) out.scrolling += 1;
    for (const name of table.querySelectorAll("td code, td a, th code"))
      if (name.getClientRects().length > 1) out.broken.push(name.textContent.trim().slice(0, 50));
  }
  for (const img of column.querySelectorAll("img")) {
    if (img.naturalWidth) out.pictures.push([img.getAttribute("src"),
                                             +(img.getBoundingClientRect().width / img.naturalWidth).toFixed(2)]);
  }
  window.parent.document.body.setAttribute("data-layout", JSON.stringify(out));
});
</script>"""


def chromium_path(given: str | None) -> str:
    found = given or shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
    if not found:
        sys.exit("check_pages: no Chromium found (apt-get install chromium, or --chromium PATH)")
    return found


def build_site(out: Path) -> Path:
    proc = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)], cwd=ROOT,
                          capture_output=True, text=True)
    if proc.returncode:
        sys.exit(f"check_pages: mkdocs build failed:\n{proc.stderr[-3000:]}")
    return out


def measure(chromium: str, site: Path, base: str, name: str, width: int) -> dict:
    """The page's measurements at ``width`` px (a copy of the page carries the measuring script)."""
    page = site / name
    probe, frame = page.with_name("layout-probe.html"), page.with_name("layout-frame.html")
    probe.write_text(page.read_text().replace("</body>", MEASURE + "</body>"))
    frame.write_text(f'<!doctype html><html><body style="margin:0"><iframe src="layout-probe.html" '
                     f'style="border:0;width:{width}px;height:900px"></iframe></body></html>')
    url = f"{base}/{frame.relative_to(site).as_posix()}"
    try:
        proc = subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                               f"--window-size={max(width, 1280) + 40},1000", "--virtual-time-budget=6000",
                               "--dump-dom", url], capture_output=True, text=True, timeout=120)
    finally:
        probe.unlink()
        frame.unlink()
    found = re.search(r'data-layout="([^"]*)"', proc.stdout)
    if not found:
        raise RuntimeError(f"{name}: no measurements from Chromium: {proc.stderr[-500:]}")
    return json.loads(html.unescape(found[1]))


@contextlib.contextmanager
def served(site: Path) -> Iterator[str]:
    """The site over HTTP on a loopback port (the frame and its page share an origin there)."""
    handler = functools.partial(QuietHandler, directory=str(site))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args) -> None:
        pass


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--site", type=Path, help="a built site (default: build one into a temporary folder)")
    parser.add_argument("--chromium", help="the browser to run (default: chromium on PATH)")
    parser.add_argument("--json", type=Path, help="also write every measurement to this file")
    args = parser.parse_args(argv)
    chromium = chromium_path(args.chromium)
    with tempfile.TemporaryDirectory() as tmp:
        site = args.site or build_site(Path(tmp) / "site")
        results, failures = {}, 0
        with served(site) as base:
            measured = {(name, width): measure(chromium, site, base, name, width) for name in PAGES for width in WIDTHS}
        for name in PAGES:
            for width in WIDTHS:
                m = results.setdefault(name, {})[width] = measured[name, width]
                bad = len(m["code"]) + len(m["tables"]) + len(m["broken"])
                failures += bad
                smallest = min((scale for _, scale in m["pictures"]), default=None)
                print(f"{'FAIL' if bad else 'ok  '} {width:4d} px  {name:45s} column {m['column']:4d} px  "
                      f"code {len(m['code'])}  tables {len(m['tables'])} (scrolling {m['scrolling']})  "
                      f"broken names {len(m['broken'])}"
                      + (f"  pictures at {smallest:.2f}x or more" if smallest is not None else ""))
                for text, over in m["code"]:
                    print(f"       code block clipped by {over} px: {text}")
                for head, over in m["tables"]:
                    print(f"       table past the column by {over} px: {head}")
                for text in m["broken"]:
                    print(f"       name broken over lines: {text}")
        if args.json:
            args.json.write_text(json.dumps(results, indent=1) + "\n")
    print(f"{failures} overflowing code blocks, tables or broken names")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
