"""The fault proxy's faked answers on a real tracker look like the tracker's own (issue 29)."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from pathlib import Path
from urllib.parse import unquote, urlsplit

import aiohttp
import pytest
from effectbench_roundup import RoundupProvider
from effectbench_roundup.client import TrackerDriver
from effectbench_roundup.pages import forms
from effectbench_roundup.tasks import TASKS, task_id

pytestmark = pytest.mark.anyio


@pytest.fixture
async def provider(tmp_path: Path) -> AsyncIterator[RoundupProvider]:
    p = RoundupProvider(tmp_root=tmp_path)
    await p.start()
    try:
        yield p
    finally:
        await p.stop()


async def _answer(provider: RoundupProvider, job: str, fault: str) -> tuple[str, str, str]:
    """(the episode's base URL, the Location and the body of the answer to one form submit,
    redirect not followed), as a browser user would submit it."""
    task = next(t for t in TASKS if t.task_id == task_id("nocsrf", job, fault))
    episode = await provider.provision(task, 0, {"note": "note x", "title": "t x"})
    try:
        driver = episode.env.driver
        assert isinstance(driver, TrackerDriver)
        browser = driver._browser
        await browser.login()
        status, page = await browser.page("issue?@template=item" if job == "open" else "issue1")
        assert status == 200, page
        (form,) = [f for f in forms(page) if "@note" in f.names]
        new = {"title": "t x", "priority": "urgent"} if job == "open" else {}
        given = {"@note": "note x", **new}
        data = aiohttp.FormData(quote_fields=False)
        for name, value in [*((n, v) for n, v in form.values if n not in given), *given.items()]:
            data.add_field(name, value)
        data._is_multipart = True
        async with browser.session.post(
            browser.base + form.action, data=data, allow_redirects=False
        ) as resp:
            assert resp.status == 302, await resp.text()
            return browser.base, resp.headers["Location"], await resp.text()
    finally:
        await episode.teardown()


def _parse(base: str, location: str) -> tuple[int, str]:
    """What an agent reads from a redirect: the issue's number and the banner it carries."""
    parts = urlsplit(location)
    assert f"{parts.scheme}://{parts.netloc}{parts.path}".startswith(base), location
    number = re.fullmatch(r"issue(\d+)", parts.path.rsplit("/", 1)[1])
    assert number is not None, location
    message = unquote(dict(q.split("=", 1) for q in parts.query.split("&"))["@ok_message"])
    return int(number.group(1)), message


@pytest.mark.timeout(240)
async def test_a_faked_redirect_has_the_shape_of_the_trackers_own(
    provider: RoundupProvider,
) -> None:
    """phantom (a create) and noop (an edit) answer what the tracker answers to the same
    submit: an absolute URL under the episode's base, the record's number, the same banner
    and the same 'Redirecting to' body."""
    for job, fault in (("open", "phantom"), ("note", "noop")):
        real_base, real, real_body = await _answer(provider, job, "ok")
        fake_base, fake, fake_body = await _answer(provider, job, fault)
        assert _parse(fake_base, fake) == _parse(real_base, real)
        assert real.removeprefix(real_base) == fake.removeprefix(fake_base)
        assert (real_body, fake_body) == (
            f'Redirecting to <a href="{real}">{real}</a>',
            f'Redirecting to <a href="{fake}">{fake}</a>',
        )
