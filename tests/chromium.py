"""A headless Chromium for tests: the Debian browser, driven by Playwright, offline.

A stopgap until effectbench/browser ships its launcher. No browser is downloaded:
Playwright starts /usr/bin/chromium (installed by .ci/run) with flags that keep it
from phoning home, so a test that records requests sees only its own page's.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

CHROMIUM = os.environ.get("EFFECTBENCH_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
)
OUTPUT_ENV = "EFFECTBENCH_TEST_OUTPUT"


@contextmanager
def chromium() -> Iterator[Any]:
    """A launched browser (playwright.sync_api.Browser), closed afterwards."""
    from playwright.sync_api import sync_playwright

    if not Path(CHROMIUM).exists():
        raise RuntimeError(
            f"no Chromium at {CHROMIUM}: install it (apt-get install -y chromium; .ci/run does)"
        )
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=list(FLAGS))
        try:
            yield browser
        finally:
            browser.close()


def output_dir() -> Path:
    """Where tests keep artifacts for CI (screenshots): $EFFECTBENCH_TEST_OUTPUT or tests/output."""
    root = Path(os.environ.get(OUTPUT_ENV) or Path(__file__).resolve().parent / "output")
    root.mkdir(parents=True, exist_ok=True)
    return root


def keep(page: Any, name: str) -> Path:
    """A full-page screenshot of ``page`` kept in output_dir() for CI; its path is printed."""
    path = output_dir() / name
    page.screenshot(path=str(path), full_page=True)
    print(f"screenshot: {path}")
    return path


class Page:
    """A page that records every request and every console error or page error."""

    def __init__(self, browser: Any) -> None:
        self.context = browser.new_context(viewport={"width": 1200, "height": 900})
        self.page = self.context.new_page()
        self.requests: list[str] = []
        self.errors: list[str] = []
        self.context.on("request", lambda r: self.requests.append(r.url))
        self.page.on("console", self._console)
        self.page.on("pageerror", lambda e: self.errors.append(f"pageerror: {e}"))

    def _console(self, msg: Any) -> None:
        if msg.type in ("error", "warning"):
            self.errors.append(f"{msg.type}: {msg.text}")

    def open(self, path: Path) -> str:
        url = path.resolve().as_uri()
        self.page.goto(url, wait_until="load")
        return url
