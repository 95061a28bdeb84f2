"""A hostile CDP agent against the episode endpoint, written from docs/agent-protocol.md
("What a contained browser agent can reach"): every escape it tries is refused.

The hub is real (the run's contained Chromium behind the filtering proxy), the client
is the reference agent's own stdlib CDP client, the host's secrets are real files (a
file under the test's temporary directory, one in ``/dev/shm``) and the download
target is a real host directory. Each test fails on the harness before the browser was
contained (Chromium as root, outside any sandbox, downloads where the agent said)."""

from __future__ import annotations

import contextlib
import http.server
import json
import os
import secrets
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio.from_thread
import attrs
import pytest
from processes import _comm, _descendants

from effectbench.agents.reference.cdp_screen_only import Cdp
from effectbench.browser import BrowserPool
from effectbench.browser.cdp_proxy import CdpEpisode, CdpHub
from effectbench.browser.policy import OriginPolicy

pytestmark = pytest.mark.timeout(180)
SECRET = "effectbench-escape-" + secrets.token_hex(8)


class _Server(http.server.ThreadingHTTPServer):
    """Serves ``_Page``, and keeps the path of every request it was sent."""

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Page)
        self.hits: list[str] = []


class _Page(http.server.BaseHTTPRequestHandler):
    """``/``: a page; ``/secret``: the secret, readable cross-origin (CORS ``*``);
    ``/go?<url>``: a redirect there."""

    server: _Server

    def do_GET(self) -> None:
        self.server.hits.append(self.path)
        if self.path.startswith("/go?"):
            self.send_response(302)
            self.send_header("Location", self.path.split("?", 1)[1])
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        secret = self.path.startswith("/secret")
        body = (SECRET if secret else "<html><body><p>the product</p></body></html>").encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Access-Control-Allow-Origin", "*")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@contextlib.contextmanager
def _serving() -> Iterator[_Server]:
    """A real HTTP server on 127.0.0.1 (its own port), in a thread."""
    server = _Server()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


@contextlib.contextmanager
def _server() -> Iterator[str]:
    """``_serving()``'s base URL."""
    with _serving() as server:
        yield f"http://127.0.0.1:{server.server_port}/"


@attrs.frozen
class World:
    """The hub, run in a portal thread, the episode's product, and the host's secrets
    (files, and another loopback service) it must not reach."""

    portal: Any
    hub: CdpHub
    secret_file: Path
    shm_file: Path
    product: str
    other_server: _Server

    @property
    def other(self) -> str:
        """Another loopback service's base URL (its own port)."""
        return f"http://127.0.0.1:{self.other_server.server_port}/"

    def episode(self) -> CdpEpisode:
        policy = OriginPolicy.of_channels({"base_url": self.product})
        episode: CdpEpisode = self.portal.call(self.hub.open, policy)
        return episode

    def close(self, episode: CdpEpisode) -> None:
        self.portal.call(self.hub.close, episode)


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    secret_file = tmp_path_factory.mktemp("host") / "secret.txt"
    secret_file.write_text(SECRET)
    secret_file.chmod(0o644)  # readable by anyone who can reach it: only the mounts stop it
    shm_file = Path("/dev/shm") / f"{SECRET}.sqlite"
    shm_file.write_text(SECRET)
    try:
        with (
            _server() as product,
            _serving() as other,
            anyio.from_thread.start_blocking_portal() as portal,
        ):
            hub = CdpHub()
            portal.call(hub.start)
            try:
                yield World(portal, hub, secret_file, shm_file, product, other)
            finally:
                portal.call(hub.stop)
    finally:
        shm_file.unlink()


def _page(cdp: Cdp) -> str:
    """A session on the episode's own page, with Page events on."""
    targets = cdp.call("Target.getTargets")["targetInfos"]
    page = next(t["targetId"] for t in targets if t["type"] == "page")
    attached = cdp.call("Target.attachToTarget", {"targetId": page, "flatten": True})
    session = str(attached["sessionId"])
    cdp.call("Page.enable", session=session)
    return session


def _goto(cdp: Cdp, session: str, url: str) -> str:
    """Navigate the page and return what the agent can then read of it, or why not."""
    cdp.events = [e for e in cdp.events if e.get("method") != "Page.loadEventFired"]
    try:
        nav = cdp.call("Page.navigate", {"url": url}, session)
    except RuntimeError as exc:
        return f"refused: {exc}"
    if nav.get("errorText"):
        return f"failed: {nav['errorText']}"
    cdp.wait("Page.loadEventFired", session)
    return _text(cdp, session)


def _text(cdp: Cdp, session: str) -> str:
    return str(
        cdp.call(
            "Runtime.evaluate",
            {"expression": "document.documentElement.outerHTML", "returnByValue": True},
            session,
        )["result"].get("value")
    )


def _uid(pid: int) -> int | None:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    line = next(x for x in status.splitlines() if x.startswith("Uid:"))
    return int(line.split()[1])


def _browser_processes(root: int) -> list[int]:
    return [pid for pid in _descendants(root) if "chrom" in _comm(pid)]


def test_the_cdp_browser_runs_as_nobody_with_no_view_of_the_host(world: World) -> None:
    assert world.hub.pipe.pid is not None
    browsers = _browser_processes(world.hub.pipe.pid)
    assert len(browsers) >= 2, browsers  # the browser and at least its zygote
    assert {_uid(pid) for pid in browsers} <= {65534, None}
    for pid in browsers:  # its mount namespace has neither secret, nor the venv
        root = Path(f"/proc/{pid}/root")
        for path in (world.secret_file, world.shm_file, Path(os.__file__)):
            assert not (root / str(path).lstrip("/")).exists(), (pid, path)


def test_the_pool_browser_runs_as_nobody_with_no_view_of_the_host(world: World) -> None:
    async def main() -> list[tuple[int | None, bool]]:
        pool = BrowserPool()
        await pool.start()
        try:
            seen = []
            for pid in _browser_processes(os.getpid()):
                if pid in _descendants(world.hub.pipe.pid or 0):
                    continue
                root = Path(f"/proc/{pid}/root")
                seen.append((_uid(pid), (root / str(world.secret_file).lstrip("/")).exists()))
            return seen
        finally:
            await pool.stop()

    seen = anyio.run(main)
    assert len(seen) >= 2, seen
    assert all(uid in (65534, None) and not visible for uid, visible in seen), seen


def test_a_file_url_reads_no_host_file_and_lists_no_host_directory(world: World) -> None:
    episode = world.episode()
    try:
        cdp = Cdp(episode.url)
        session = _page(cdp)
        for url in (
            world.secret_file.as_uri(),
            "file:///dev/shm/",
            world.secret_file.parent.as_uri() + "/",
            "view-source:" + world.secret_file.as_uri(),
        ):
            assert SECRET not in _goto(cdp, session, url), url
        try:  # a new page opened on the file directly
            created = cdp.call("Target.createTarget", {"url": world.secret_file.as_uri()})
        except RuntimeError:
            created = None
        if created is not None:
            other = cdp.call(
                "Target.attachToTarget", {"targetId": created["targetId"], "flatten": True}
            )["sessionId"]
            assert SECRET not in _text(cdp, other)
        cdp.ws.close()
    finally:
        world.close(episode)


_DOWNLOAD_JS = (
    "(() => { const a = document.createElement('a'); a.href = URL.createObjectURL(new "
    "Blob(['import os; os.system(\"id\")'], {type: 'application/octet-stream'})); "
    "a.download = 'escape.pth'; document.body.append(a); a.click(); return 'clicked'; })()"
)


def _download(cdp: Cdp, session: str) -> list[dict[str, Any]]:
    """Start a download from the page (a blob: link, no network) and return the
    download events the agent is given: those until a later command's answer, and for
    a download that began, until it completed or was cancelled."""
    cdp.events = []
    cdp.call("Runtime.evaluate", {"expression": _DOWNLOAD_JS, "returnByValue": True}, session)
    began = cdp.call(
        "Runtime.evaluate",
        {"expression": "new Promise(r => setTimeout(() => r(1), 0))", "awaitPromise": True},
        session,
    )
    assert began["result"]["value"] == 1
    events = [e for e in cdp.events if "download" in str(e.get("method", "")).lower()]
    if any(e["method"].endswith("downloadWillBegin") for e in events):
        # granted: wait for the browser to finish writing (as an agent would)
        while not any(
            e.get("method", "").endswith("downloadProgress")
            and e["params"]["state"] in ("completed", "canceled")
            for e in events
        ):
            events.append(json.loads(cdp.ws.recv()))
    return events


def test_downloads_never_reach_a_host_path_page_or_browser_level(
    world: World, tmp_path: Path
) -> None:
    page_dir, browser_dir = tmp_path / "page", tmp_path / "browser"
    page_dir.mkdir()
    browser_dir.mkdir()
    episode = world.episode()
    try:
        cdp = Cdp(episode.url)
        session = _page(cdp)
        assert "the product" in _goto(cdp, session, world.product)
        for method, params, where in (
            ("Page.setDownloadBehavior", {"behavior": "allow", "downloadPath": str(page_dir)},
             session),
            ("Browser.setDownloadBehavior",
             {"behavior": "allow", "downloadPath": str(browser_dir), "eventsEnabled": True},
             None),
            ("Browser.setDownloadBehavior",
             {"behavior": "allowAndName", "downloadPath": str(browser_dir),
              "browserContextId": episode.context_id, "eventsEnabled": True}, None),
        ):  # fmt: skip
            try:
                cdp.call(method, params, where)
            except RuntimeError:
                pass  # refused outright: as good as ignored
            events = _download(cdp, session)
            states = {e["params"]["state"] for e in events if "state" in e["params"]}
            assert "completed" not in states, (method, events)
            assert sorted(os.listdir(page_dir)) == sorted(os.listdir(browser_dir)) == []
        cdp.ws.close()
    finally:
        world.close(episode)


def _refused_or(cdp: Cdp, method: str, params: dict[str, Any], session: str | None = None) -> Any:
    """The reply, or the refusal's text."""
    try:
        return cdp.call(method, params, session)
    except RuntimeError as exc:
        return f"refused: {exc}"


def test_another_context_and_the_browser_target_stay_out_of_reach(world: World) -> None:
    a, b = world.episode(), world.episode()
    try:
        cdp = Cdp(a.url)
        session = _page(cdp)
        browser_target = _refused_or(cdp, "Target.getTargetInfo", {})
        assert isinstance(browser_target, dict), browser_target
        browser_id = browser_target["targetInfo"]["targetId"]
        browser_sessions = [
            cdp.call("Target.attachToBrowserTarget", {})["sessionId"],
            cdp.call("Target.attachToTarget", {"targetId": browser_id, "flatten": True})[
                "sessionId"
            ],
        ]
        for method, params, where in (
            ("Target.createBrowserContext", {}, None),
            ("Target.attachToTarget", {"targetId": b.target_id, "flatten": True}, None),
            ("Target.getTargetInfo", {"targetId": b.target_id}, None),
            ("Target.getTargetInfo", {"targetId": b.target_id}, session),
            ("Target.autoAttachRelated", {"targetId": b.target_id,
                                          "waitForDebuggerOnStart": False}, None),
            ("Target.exposeDevToolsProtocol", {"targetId": b.target_id}, None),
            ("Target.createTarget", {"url": "about:blank", "browserContextId": b.context_id},
             None),
            ("Storage.getCookies", {"browserContextId": b.context_id}, None),
            ("Browser.grantPermissions", {"permissions": ["clipboardReadWrite"]}, None),
            ("Browser.setPermission", {"permission": {"name": "geolocation"},
                                       "setting": "granted"}, None),
            ("Browser.getWindowForTarget", {"targetId": a.target_id}, None),
            ("Browser.getHistograms", {}, None),
            ("Browser.getVersion", {}, session),
        ):  # fmt: skip
            reply = _refused_or(cdp, method, params, where)
            assert isinstance(reply, str) and reply.startswith("refused"), (method, reply)
            # the browser sessions a client may open (attachToBrowserTarget, or the
            # browser target itself, Puppeteer's) are held to the same rules
            for extra in browser_sessions:
                if where is None:
                    reply = _refused_or(cdp, method, params, extra)
                    assert isinstance(reply, str) and reply.startswith("refused"), (method, reply)
        assert "SECRET" not in json.dumps(cdp.events)
        assert b.target_id not in json.dumps(cdp.events)
        cdp.ws.close()
    finally:
        world.close(a)
        world.close(b)


_UPLOAD_JS = (
    "new Promise(r => { const i = document.querySelector('input'); i.files.length ? "
    "i.files[0].text().then(r) : r('no file'); })"
)


def test_a_file_input_or_a_drag_reads_no_host_file(world: World) -> None:
    episode = world.episode()
    try:
        cdp = Cdp(episode.url)
        session = _page(cdp)
        assert "the product" in _goto(cdp, session, world.product)
        cdp.call(
            "Runtime.evaluate",
            {"expression": "document.body.innerHTML = '<input type=file>'"},
            session,
        )
        doc = cdp.call("DOM.getDocument", {}, session)["root"]["nodeId"]
        node = cdp.call("DOM.querySelector", {"nodeId": doc, "selector": "input"}, session)
        upload = _refused_or(
            cdp,
            "DOM.setFileInputFiles",
            {"files": [str(world.secret_file)], "nodeId": node["nodeId"]},
            session,
        )
        read = cdp.call(
            "Runtime.evaluate", {"expression": _UPLOAD_JS, "awaitPromise": True}, session
        )
        assert SECRET not in json.dumps([upload, read])
        drag = _refused_or(
            cdp,
            "Input.dispatchDragEvent",
            {"type": "dragEnter", "x": 5, "y": 5,
             "data": {"items": [], "files": [str(world.secret_file)], "dragOperationsMask": 1}},
            session,
        )  # fmt: skip
        assert isinstance(drag, str) and drag.startswith("refused"), drag
        cdp.ws.close()
    finally:
        world.close(episode)


def _evaluate(cdp: Cdp, session: str, expression: str) -> str:
    reply = cdp.call(
        "Runtime.evaluate",
        {"expression": expression, "awaitPromise": True, "returnByValue": True},
        session,
    )
    return json.dumps(reply)


def test_the_browser_reaches_no_other_loopback_port(world: World) -> None:
    """Another service on 127.0.0.1 (its own port) serves the secret to anyone; the
    episode's browser reaches it neither by a navigation the agent names, nor by one
    the page starts, nor by a redirect of the product, nor by a subresource."""
    secret_url = world.other + "secret"
    episode = world.episode()
    try:
        cdp = Cdp(episode.url)
        session = _page(cdp)
        assert "the product" in _goto(cdp, session, world.product)
        seen = [
            _goto(cdp, session, secret_url),
            _goto(cdp, session, "http://localhost:" + world.other.rsplit(":", 1)[1] + "secret"),
            _goto(cdp, session, world.product + "go?" + secret_url),
        ]
        assert "the product" in _goto(cdp, session, world.product)
        seen.append(
            _evaluate(
                cdp, session,
                f"fetch({secret_url!r}).then(r => r.text()).catch(e => 'failed: ' + e)",
            )
        )  # fmt: skip
        cdp.events = [e for e in cdp.events if e.get("method") != "Page.loadEventFired"]
        cdp.call("Runtime.evaluate", {"expression": f"location.href = {secret_url!r}"}, session)
        cdp.wait("Page.loadEventFired", session)
        seen.append(_text(cdp, session))
        assert not any(SECRET in text for text in seen), seen
        assert "the product" in _goto(cdp, session, world.product)  # the product still is
        cdp.ws.close()
    finally:
        world.close(episode)
    assert episode.gate.refused >= 3  # the page's own navigation, the redirect, the fetch


_SCHEMES = (
    "chrome://version/",
    "devtools://devtools/bundled/inspector.html",
    f"data:text/html,<p>{SECRET}</p>",
    "javascript:document.title",
    "blob:http://127.0.0.1/00000000-0000-0000-0000-000000000000",
)


def test_every_other_scheme_is_refused_for_a_document(world: World) -> None:
    """``chrome:``, ``devtools:``, ``data:``, ``javascript:``, ``blob:``: refused by the
    proxy as a navigation and as a new page, at browser level and on a browser session
    the client opened, with the reason (not some failure of Chromium's)."""
    episode = world.episode()
    try:
        cdp = Cdp(episode.url)
        session = _page(cdp)
        extra = cdp.call("Target.attachToBrowserTarget", {})["sessionId"]
        for url in _SCHEMES:
            scheme = url.split(":", 1)[0]
            for method, params, where in (
                ("Page.navigate", {"url": url}, session),
                ("Target.createTarget", {"url": url}, None),
                ("Target.createTarget", {"url": url}, extra),
            ):
                reply = _refused_or(cdp, method, params, where)
                assert isinstance(reply, str) and f"{scheme}: URLs are refused" in reply, (
                    method, url, reply,
                )  # fmt: skip
        pages = [t for t in cdp.call("Target.getTargets")["targetInfos"] if t["type"] == "page"]
        assert [p["url"] for p in pages] == ["about:blank"], pages
        cdp.ws.close()
    finally:
        world.close(episode)


def test_no_command_hands_the_browser_a_host_file(world: World) -> None:
    """``Page.handleFileChooser``, ``Network.loadNetworkResource`` of a host file, and the
    ``PWA`` and ``Extensions`` domains: refused by the proxy, on the page's session and at
    browser level."""
    episode = world.episode()
    try:
        cdp = Cdp(episode.url)
        session = _page(cdp)
        frame = cdp.call("Page.getFrameTree", {}, session)["frameTree"]["frame"]["id"]
        secret = world.secret_file.as_uri()
        for method, params in (
            ("Page.handleFileChooser", {"action": "accept", "files": [str(world.secret_file)]}),
            ("Network.loadNetworkResource",
             {"frameId": frame, "url": secret,
              "options": {"disableCache": True, "includeCredentials": False}}),
            ("PWA.install", {"manifestId": secret, "installUrlOrBundleUrl": secret}),
            ("PWA.launch", {"manifestId": secret}),
            ("Extensions.loadUnpacked", {"path": str(world.secret_file.parent)}),
        ):  # fmt: skip
            on_page = _refused_or(cdp, method, params, session)
            assert isinstance(on_page, str), (method, on_page)
            assert "reads no host files" in on_page or "not allowed" in on_page, on_page
            at_browser = _refused_or(cdp, method, params)
            assert isinstance(at_browser, str) and "not allowed" in at_browser, at_browser
        assert SECRET not in json.dumps(cdp.events)
        cdp.ws.close()
    finally:
        world.close(episode)


_SUBRESOURCES_JS = """new Promise(done => {
  const base = %(base)s, mark = %(mark)s, left = [];
  const settle = p => left.push(p);
  for (const [tag, attr] of [["img", "src"], ["script", "src"], ["iframe", "src"],
                             ["link", "href"], ["video", "src"]]) {
    const el = document.createElement(tag);
    if (tag === "link") el.rel = "stylesheet";
    settle(new Promise(r => { el.onload = () => r(tag + " loaded"); el.onerror = () => r(tag); }));
    el[attr] = base + "secret?" + mark + "-" + tag;
    document.body.append(el);
  }
  settle(new Promise(r => {
    const ws = new WebSocket(base.replace("http", "ws") + "secret?" + mark + "-ws");
    ws.onopen = () => r("ws open"); ws.onerror = () => r("ws"); ws.onclose = () => r("ws");
  }));
  settle(navigator.sendBeacon(base + "secret?" + mark + "-beacon", "x") ? "beacon" : "beacon");
  Promise.all(left).then(done);
})"""


def test_no_subresource_websocket_or_beacon_of_the_page_reaches_another_port(
    world: World,
) -> None:
    """The product's page loads an image, a script, a frame, a stylesheet and a video
    from another service on 127.0.0.1, opens a WebSocket to it and sends it a beacon:
    not one request arrives there (the gate answers 403, a CONNECT for the WebSocket)."""
    mark = secrets.token_hex(6)
    episode = world.episode()
    try:
        cdp = Cdp(episode.url)
        session = _page(cdp)
        assert "the product" in _goto(cdp, session, world.product)
        before = episode.gate.refused
        expression = _SUBRESOURCES_JS % {"base": json.dumps(world.other), "mark": json.dumps(mark)}
        settled = _evaluate(cdp, session, expression)
        assert "ws open" not in settled, settled  # (a frame "loads" the gate's 403 page)
        cdp.ws.close()
    finally:
        world.close(episode)
    assert [hit for hit in world.other_server.hits if mark in hit] == []
    assert episode.gate.refused - before >= 6  # five elements and the WebSocket at least


ESCAPE_AGENT = Path(__file__).resolve().parents[1] / "agents" / "cdp_escape_agent.py"


def test_an_isolated_hostile_browser_agent_gets_nothing_out_of_a_real_run(tmp_path: Path) -> None:
    """The whole path: ``exec-each+browser`` run ``--isolate``d on MockMed; the agent
    reports everything its browser gave back, and none of it is a host secret."""
    from effectbench_mockmed import MockMedProvider

    from effectbench.agents import ExecArm
    from effectbench.agents.reference import CDP_AGENT, system_python
    from effectbench.api import execute
    from effectbench.log.reader import read_log

    secret_file = tmp_path / "host" / "secret.txt"
    secret_file.parent.mkdir()
    secret_file.write_text(SECRET)
    downloads = tmp_path / "downloads"
    downloads.mkdir()
    downloads.chmod(0o777)  # writable by anyone: only the browser's containment stops it
    run_dir = tmp_path / "run"
    with _server() as other:
        argv = [system_python(), str(ESCAPE_AGENT), str(CDP_AGENT), other + "secret",
                str(downloads), secret_file.as_uri()]  # fmt: skip
        arm = ExecArm(argv, name="escape", mode="per_episode", browser=True, isolate=True,
                      timeout_s=60)  # fmt: skip
        provider = MockMedProvider()
        result = anyio.run(
            lambda: execute(
                provider=provider, arms=[arm], trials=1, out=run_dir, task_globs=["mockmed::ok"]
            )
        )
    assert not result.interrupted
    reports = [e.data for e in read_log(run_dir / "events.jsonl") if e.type == "episode.reported"]
    assert len(reports) == 1, reports
    found = json.loads(reports[0]["message"])
    assert SECRET not in json.dumps(found), found
    assert ".sqlite" not in found["shm"] and "mockmed" not in found["shm"], found["shm"]
    assert not found["product"].startswith(("refused", "failed")), found["product"]
    assert os.listdir(downloads) == []
