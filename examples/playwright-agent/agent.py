"""An EffectBench protocol agent (docs/agent-protocol.md) that drives the episode's own
browser with Playwright's ``connect_over_cdp``.

It opens the product's form, fills it from the task's solution, clicks Save and
trusts the banner the next page shows. It never reads the records, so it scores like
the reference screen-only agent (MockMed: SWER 5/9 a trial). Run it from its own venv
(``make`` here makes ``.venv``), in this directory:

    effectbench run --isolate --arm 'playwright=exec+browser:.venv/bin/python agent.py'

One process serves many episodes at once, one asyncio task each.
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

from playwright.async_api import Error, Page, Playwright, async_playwright


def send(message: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def report(episode_id: str, success: bool, message: str) -> None:
    send({"type": "report", "episode_id": episode_id, "reported_success": success,
          "halted": not success, "message": message})  # fmt: skip


async def fill(page: Page, solution: dict[str, Any]) -> None:
    """Pick each select's option and type each text field the solution names."""
    for name, value in solution.items():
        field = page.locator(f'form [name="{name}"]')
        if not await field.count():
            continue
        text = "" if value is None else str(value)
        if await field.evaluate("e => e.tagName.toLowerCase()") == "select":
            await field.select_option(text)
        else:
            await field.fill(text)


async def submit(page: Page) -> dict[str, Any] | None:
    """Click Save and read the banner; None when the next page did not load."""
    try:
        async with page.expect_navigation():
            await page.click("form button[type=submit]")
    except Error:
        return None
    banner: dict[str, Any] | None = await page.evaluate(
        """() => { const b = document.getElementById('banner');
                   return b ? {saved: b.classList.contains('saved'),
                               text: b.textContent.trim()} : null; }"""
    )
    return banner


async def episode(pw: Playwright, msg: dict[str, Any]) -> None:
    ep, task, channels = msg["episode_id"], msg["task"], msg["channels"]
    base = channels.get("web_url") or channels.get("base_url")
    endpoint = (msg.get("browser") or {}).get("cdp_url")
    if not endpoint:
        return report(ep, False, "no browser: run me with exec+browser:")
    if not task.get("solution") or not base:
        return report(ep, False, "no scripted action: the task offers no solution")
    browser = await pw.chromium.connect_over_cdp(endpoint)
    try:
        page = browser.contexts[0].pages[0]  # the episode's one blank page
        await page.goto(base)
        await fill(page, task["solution"])
        banner = await submit(page)
    finally:
        await browser.close()  # disconnects; the harness disposes of the context
    saved = bool(banner and banner["saved"])
    send({"type": "action", "episode_id": ep, "kind": "submit_form",
          "detail": {"screen_says_saved": saved}})  # fmt: skip
    text = banner["text"] if banner else "no banner"
    if saved:
        return report(ep, True, f"screen says saved: {text}")
    return report(ep, False, f"screen did not confirm the save: {text}")


async def guarded(pw: Playwright, msg: dict[str, Any]) -> None:
    try:
        await episode(pw, msg)
    except Exception as exc:  # noqa: BLE001 - told to the harness, which fails the episode
        send({"type": "error", "episode_id": msg["episode_id"], "message": repr(exc)})


async def main() -> None:
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=2**20)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    running: set[asyncio.Task[None]] = set()
    async with async_playwright() as pw:
        while line := await reader.readline():  # end of stdin: the run is over
            msg = json.loads(line) if line.strip() else {}
            if msg.get("type") == "episode":  # "cancel": the harness gave up on it already
                task = asyncio.create_task(guarded(pw, msg))
                running.add(task)
                task.add_done_callback(running.discard)
        await asyncio.gather(*running)


if __name__ == "__main__":
    asyncio.run(main())
