"""The example run the README links (docs/example/, issue 30 item 3): the MockMed anchor's
default run, committed so a visitor sees a report before installing. Its report and
every artifact are what this checkout's code builds from its committed log (a rescore
of a copy gives the same bytes), the log is a sound run of the current anchor with the
pinned figures, and it stays small. After a change to the report or the artifacts:
``.venv/bin/effectbench rescore docs/example`` and commit; after a change to the pack
or the scoring: ``.venv/bin/effectbench run --out docs/example --force``."""

from __future__ import annotations

import shutil
from pathlib import Path

import orjson
from effectbench_mockmed import TASKS

from effectbench.core.rundir import RunDir
from effectbench.core.versions import SCORING_VERSION
from effectbench.run.plan import pack_fingerprint
from effectbench.testing import run_cli

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "docs" / "example"
LINK = "docs/example/report.html"
MAX_BYTES = 2_000_000
HOST_KEYS = ("python", "platform", "dependencies")
"""What manifest.json records of the machine that built it (a rescore writes its own)."""
REGENERATE = "run `.venv/bin/effectbench rescore docs/example` and commit what it writes"


def _files(run: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(run.iterdir())}


def test_the_readme_links_the_example_report() -> None:
    readme = (ROOT / "README.md").read_text("utf-8")
    assert f"]({LINK})" in readme, f"the README no longer links {LINK}"
    assert (ROOT / LINK).is_file()


def test_the_example_is_what_this_code_builds_from_its_log(tmp_path: Path) -> None:
    committed = _files(EXAMPLE)
    run = RunDir(EXAMPLE)
    assert set(committed) == {
        p.name for p in (run.log, run.manifest, run.metrics, run.results, run.summary, run.report)
    }
    assert sum(map(len, committed.values())) < MAX_BYTES, "docs/example has grown past 2 MB"
    copy = tmp_path / "example"
    shutil.copytree(EXAMPLE, copy)
    proc = run_cli("rescore", str(copy), cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rebuilt = _files(copy)
    manifest = RunDir(EXAMPLE).manifest.name
    for files in (committed, rebuilt):
        built_here = orjson.loads(files[manifest])
        files[manifest] = orjson.dumps({k: v for k, v in built_here.items() if k not in HOST_KEYS})
    stale = [name for name in committed if rebuilt[name] != committed[name]]
    assert stale == [], (
        f"docs/example: {', '.join(stale)} differ from what the code builds: {REGENERATE}"
    )


def test_the_example_is_a_sound_run_of_the_anchor_with_the_pinned_figures() -> None:
    plan = orjson.loads(RunDir(EXAMPLE).log.read_bytes().split(b"\n", 1)[0])["data"]["plan"]
    assert plan["provider"]["name"] == "mockmed"
    assert plan["arms"] == ["screen_only", "effect_verified"]
    assert plan["trials"] == 10
    assert plan["pack_fingerprint"] == pack_fingerprint(TASKS), "the anchor's pack changed"
    assert plan["versions"]["scoring"] == SCORING_VERSION, "the scoring changed"
    arms = orjson.loads(RunDir(EXAMPLE).metrics.read_bytes())["arms"]
    swer = {arm: (arms[arm]["swer"]["numerator"], arms[arm]["swer"]["denominator"]) for arm in arms}
    assert swer == {"screen_only": (50, 90), "effect_verified": (0, 90)}
    proc = run_cli("verify", str(EXAMPLE), cwd=ROOT)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.startswith("sound: ")
    report = RunDir(EXAMPLE).report.read_text("utf-8")
    assert "<b>On SWER, effect_verified is better</b>" in report
    assert "fixture invariants, not findings" in report
