"""`effectbench view DIR --static`: DIR/index.html and each run's episodes.html, from the
runs' own artifacts; a broken run is a row saying how to fix it; a user's file is never
replaced."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from view_runs import BROKEN, swer_episodes, view_folder

from effectbench.testing.cli import run_cli


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return view_folder(tmp_path_factory.mktemp("static"))


def test_static_writes_the_index_and_each_runs_episode_page(runs: Path) -> None:
    done = run_cli("view", str(runs), "--static")
    assert done.returncode == 0, done.stderr
    assert (
        done.stdout.strip() == f"viewer: {(runs / 'index.html').resolve()} (7 runs, 4 unreadable)"
    )
    index = (runs / "index.html").read_text("utf-8")
    for name, words in BROKEN.items():
        start = index.index(f'data-run="{name}"')
        assert words in index[start : index.index("</tr>", start)]
        assert not (runs / name / "episodes.html").exists()
    metrics = orjson.loads((runs / "a" / "metrics.json").read_bytes())
    swer = metrics["arms"]["screen_only"]["swer"]
    assert f'a/episodes.html?arm=screen_only&amp;outcome=SWER">{swer["numerator"]}/' in index
    page = (runs / "a" / "episodes.html").read_text("utf-8")
    assert page.count("<tr data-slot=") == metrics["arms"]["screen_only"]["n_episodes"] * 2
    for episode in swer_episodes(runs / "a", "screen_only"):
        assert 'href="report.html#ep' in page and f">{episode}</a>" in page
    again = run_cli("view", str(runs), "--static")
    assert again.returncode == 0 and (runs / "index.html").read_text("utf-8") == index


def test_a_results_file_that_cannot_be_read_is_a_row_saying_so(tmp_path: Path) -> None:
    runs = view_folder(tmp_path)
    (runs / "b" / "results.jsonl").write_bytes(b"{cut")
    done = run_cli("view", str(runs), "--static")
    assert done.returncode == 0, done.stderr
    index = (runs / "index.html").read_text("utf-8")
    start = index.index('data-run="b"')
    row = index[start : index.index("</tr>", start)]
    assert "results.jsonl line 1 is not JSON" in row and "effectbench rescore" in row


def test_a_users_index_html_is_never_replaced(tmp_path: Path) -> None:
    (tmp_path / "index.html").write_text("my notes")
    done = run_cli("view", str(tmp_path), "--static")
    assert done.returncode == 2
    assert "was not written by effectbench" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    assert (tmp_path / "index.html").read_text() == "my notes"
