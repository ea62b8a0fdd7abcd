"""Debian's Chromium, headless, driven by the `playwright` package (no browser download: the
system's /usr/bin/chromium, which .ci/run installs with apt when it is missing).

Also the command that regenerates the README's screenshot of the demo's incident page:

    elastic-audit demo -o html --no-progress > /tmp/incident.html
    .venv/bin/python tests/support/browser.py /tmp/incident.html docs/img/incident-page.png
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

CHROMIUM = os.environ.get("ELASTIC_AUDIT_CHROMIUM", "/usr/bin/chromium")
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@dataclass
class Visit:
    """One page opened: what its console said, every request it made, errors it raised."""

    page: Any
    console: list[tuple[str, str]] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    dialogs: list[str] = field(default_factory=list)


@contextmanager
def chromium() -> Iterator[Any]:
    """The browser (playwright's Browser), closed on the way out."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            yield browser
        finally:
            browser.close()


@contextmanager
def visit(browser: Any, path: Path, width: int, scheme: str = "light") -> Iterator[Visit]:
    """Open the file at `path` in a fresh context `width` px wide, recording what it does."""
    context = browser.new_context(
        viewport={"width": width, "height": 900}, color_scheme=scheme, java_script_enabled=True
    )
    page = context.new_page()
    v = Visit(page)
    page.on("console", lambda m: v.console.append((m.type, m.text)))
    page.on("request", lambda r: v.requests.append(r.url))
    page.on("pageerror", lambda e: v.errors.append(str(e)))
    page.on("dialog", lambda d: (v.dialogs.append(d.message), d.dismiss()))
    page.goto(path.resolve().as_uri(), wait_until="load")
    try:
        yield v
    finally:
        context.close()


def screenshot(html: Path, png: Path, width: int = 1280) -> Path:
    """A full-page PNG of the page at `html`."""
    with chromium() as browser, visit(browser, html, width) as v:
        png.parent.mkdir(parents=True, exist_ok=True)
        v.page.screenshot(path=str(png), full_page=True)
    return png


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: browser.py PAGE.html OUT.png")
    print(screenshot(Path(sys.argv[1]), Path(sys.argv[2])))
