"""`effectbench view DIR` served for real on 127.0.0.1: the index from each run's own
artifacts (a broken run is a row saying how to fix it), filtered episode lists, on-demand
comparisons and drill-downs, nothing outside DIR, nothing written, Ctrl-C stops it."""

from __future__ import annotations

import http.client
import signal
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote, urlsplit

import orjson
import pytest
from view_runs import BROKEN, SECRET, served, swer_episodes, tree, view_folder

from effectbench.testing.cli import effectbench_command, run_cli


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return view_folder(tmp_path_factory.mktemp("view"))


@pytest.fixture(scope="module")
def server(runs: Path) -> Iterator[tuple[str, int]]:
    with served(runs) as (_, url):
        parts = urlsplit(url)
        assert parts.hostname == "127.0.0.1" and parts.port is not None
        yield parts.hostname, parts.port


def _get(
    server: tuple[str, int], path: str, method: str = "GET", host: str | None = None
) -> tuple[int, str]:
    """One request with ``path`` sent exactly as written (no client-side normalising)."""
    conn = http.client.HTTPConnection(*server, timeout=30)
    try:
        conn.putrequest(method, path, skip_host=True, skip_accept_encoding=True)
        conn.putheader("Host", host or f"127.0.0.1:{server[1]}")
        conn.endheaders()
        resp = conn.getresponse()
        return resp.status, resp.read().decode("utf-8", "replace")
    finally:
        conn.close()


def test_the_index_shows_each_runs_own_figures_and_each_broken_run_says_why(
    server: tuple[str, int], runs: Path
) -> None:
    status, page = _get(server, "/")
    assert status == 200
    for name in ("a", "b", "sweep/other"):
        metrics = orjson.loads((runs / name / "metrics.json").read_bytes())
        for arm in metrics["arm_order"]:
            swer = metrics["arms"][arm]["swer"]
            href = f'{name}/episodes.html?arm={arm}&amp;outcome=SWER">'
            assert f"{href}{swer['numerator']}/{swer['denominator']} " in page
    for name, words in BROKEN.items():
        start = page.index(f'data-run="{name}"')
        row = page[start : page.index("</tr>", start)]
        assert words in row
        assert "effectbench rescore" in row or "not a whole run directory" in row
    assert "effectbench run --resume" in page


def test_an_episode_list_is_filtered_by_arm_and_outcome(
    server: tuple[str, int], runs: Path
) -> None:
    status, page = _get(server, "/a/episodes.html?arm=screen_only&outcome=SWER")
    assert status == 200
    rows = page.count("<tr data-slot=")
    assert rows == len(swer_episodes(runs / "a", "screen_only")) > 0
    assert page.count('data-arm="screen_only"') == rows
    assert page.count('data-outcome="SWER ') == rows
    status, page = _get(server, "/a/episodes.html?category=control&outcome=success")
    assert status == 200 and 'data-category="C' not in page and "<tr data-slot=" in page


def test_two_runs_compare_and_an_unsampled_episode_gets_its_drill_down(
    server: tuple[str, int],
) -> None:
    status, page = _get(server, "/compare.html?run=a&run=b")
    assert status == 200 and "a:screen_only" in page and "b:screen_only" in page
    status, page = _get(server, "/compare.html?run=a&run=sweep/other")
    assert status == 409 and "cannot pair" in page
    episode = "screen_only::c1-save::t0"
    status, page = _get(server, f"/a/episode.html?id={quote(episode)}")
    assert status == 200 and f'data-episode="{episode}"' in page


@pytest.mark.parametrize(
    "path",
    [
        "/../secret.txt",
        "/../../../../etc/passwd",
        "/%2e%2e/secret.txt",
        "/a/..%2f..%2fsecret.txt",
        "/a/%2e%2e%2f%2e%2e%2fsecret.txt",
        "/a/..%5c..%5csecret.txt",
        "/outside/secret.txt",
        "/a/escape.txt",
        "//etc/passwd",
        "/a/events.jsonl%00.html",
        "/compare.html?run=../../etc&run=a",
    ],
)
def test_a_path_outside_the_folder_is_refused(server: tuple[str, int], path: str) -> None:
    status, body = _get(server, path)
    assert status in (400, 404)
    assert SECRET not in body and "root:" not in body


def test_it_is_read_only_and_answers_only_its_loopback_name(
    server: tuple[str, int], runs: Path
) -> None:
    before = tree(runs.parent)
    for path in ("/", "/a/episodes.html", "/compare.html?run=a&run=b", "/a/report.html"):
        assert _get(server, path)[0] == 200
    assert _get(server, "/a/episode.html?id=screen_only%3A%3Actl-ok%3A%3At0")[0] == 200
    assert _get(server, "/", method="POST")[0] == 405
    assert _get(server, "/a/report.html", method="DELETE")[0] == 405
    assert _get(server, "/", host="attacker.example")[0] == 403
    assert tree(runs.parent) == before


def test_ctrl_c_stops_it_cleanly(runs: Path) -> None:
    with served(runs) as (proc, url):
        port = urlsplit(url).port
        assert port is not None
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
        assert proc.returncode == 0, err
        assert out.strip() == "viewer: stopped" and err == ""
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.1", port), timeout=5).close()


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["sigint", "sigterm"])
def test_it_stops_on_a_signal_even_started_with_sigint_ignored(runs: Path, sig: int) -> None:
    """Started in the background of a script (`effectbench view runs &`), a process
    inherits SIGINT ignored; the viewer relied on Python's KeyboardInterrupt and never
    stopped (a suite run in the background hung here). SIGTERM stops it cleanly too."""
    # as a shell leaves a background job: SIGINT ignored, kept across exec
    command = [
        "sh",
        "-c",
        'trap "" INT; exec "$@"',
        "sh",
        *effectbench_command(),
        "view",
        str(runs),
    ]
    ignoring = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert ignoring.stdout is not None
        assert ignoring.stdout.readline().startswith("viewer: http://127.0.0.1:")
        ignoring.send_signal(sig)
        out, err = ignoring.communicate(timeout=60)
    finally:
        if ignoring.poll() is None:
            ignoring.kill()
            ignoring.wait()
    assert ignoring.returncode == 0, err
    assert out.strip() == "viewer: stopped" and err == ""


def test_bad_arguments_are_one_line(tmp_path: Path) -> None:
    missing = run_cli("view", str(tmp_path / "nowhere"))
    assert missing.returncode == 2 and "is not a folder" in missing.stderr
    assert len(missing.stderr.strip().splitlines()) == 1
    both = run_cli("view", str(tmp_path), "--static", "--port", "8000")
    assert both.returncode == 2 and "--port is for the served viewer" in both.stderr
    bad = run_cli("view", str(tmp_path), "--port", "70000")
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1
