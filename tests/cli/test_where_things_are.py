"""Where a newcomer's results are (issue 30 item 3): ``run`` prints the absolute path of
report.html, ``compare`` that of its page, and the README's ``compare`` example follows
the runs that make it work."""

from __future__ import annotations

import re
from pathlib import Path

from effectbench.testing import run_cli

ROOT = Path(__file__).resolve().parents[2]
SMALL = ("--task", "mockmed::ok", "--trials", "1", "-q")


def test_run_prints_the_absolute_path_of_its_report(tmp_path: Path) -> None:
    proc = run_cli("run", *SMALL, "--out", "r", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    report = tmp_path / "r" / "report.html"
    assert report.is_file()
    assert f"report: {report}" in proc.stdout.splitlines()
    assert f"view it with the other runs: effectbench view {tmp_path}" in proc.stdout.splitlines()
    bare = run_cli("run", *SMALL, "--out", "bare", "--no-report", cwd=tmp_path)
    assert bare.returncode == 0, bare.stderr
    assert not [line for line in bare.stdout.splitlines() if line.startswith("report:")]


def _shell_blocks(text: str) -> list[list[str]]:
    return [block.splitlines() for block in re.findall(r"```sh\n(.*?)```", text, re.DOTALL)]


def test_every_readme_compare_follows_the_runs_it_compares() -> None:
    seen = 0
    for block in _shell_blocks((ROOT / "README.md").read_text()):
        for i, line in enumerate(block):
            words = line.split("#")[0].split()
            if words[:2] != ["effectbench", "compare"]:
                continue
            seen += 1
            written = {w for before in block[:i] for w in _outs(before)}
            missing = [d for d in words[2:] if not d.startswith("-") and d not in written]
            assert not missing, f"README runs `{line.strip()}` before any run writes {missing}"
    assert seen, "the README shows no effectbench compare"


def _outs(line: str) -> list[str]:
    words = line.split("#")[0].split()
    return [words[j + 1] for j, w in enumerate(words[:-1]) if w == "--out"]


def test_compare_prints_the_absolute_path_of_the_page_it_wrote(tmp_path: Path) -> None:
    for out, arm in (("a", "screen_only"), ("b", "effect_verified")):
        proc = run_cli("run", *SMALL, "--arm", arm, "--out", out, "--no-report", cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
    proc = run_cli("compare", "a", "b", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == [f"comparison: {tmp_path / 'compare.html'}"]
    assert (tmp_path / "compare.html").is_file()
    (tmp_path / "pages").mkdir()
    proc = run_cli("compare", "a", "b", "--out", "pages/ab.html", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == [f"comparison: {tmp_path / 'pages' / 'ab.html'}"]
    assert (tmp_path / "pages" / "ab.html").is_file()
