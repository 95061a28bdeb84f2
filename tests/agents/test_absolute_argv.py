"""``absolute_argv`` takes any command line an arm may be given: an argument that is no
existing path (a ``-c`` script longer than a file name may be, one with a NUL) is kept
as it is, never an exception; one that names a file is made absolute."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from effectbench.agents.prefixes import absolute_argv


def test_a_long_inline_script_is_passed_through() -> None:
    script = "print(1)\n" * 200  # 1,800 characters: longer than a file name may be
    assert absolute_argv(["/usr/bin/python3", "-c", script]) == ["/usr/bin/python3", "-c", script]


def test_a_file_argument_is_made_absolute(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "agent.py").write_text("")
    monkeypatch.chdir(tmp_path)
    argv = absolute_argv(["/usr/bin/python3", "agent.py"])
    assert argv == ["/usr/bin/python3", str((tmp_path / "agent.py").resolve())]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.text(min_size=1, max_size=600).filter(lambda a: "/" not in a), max_size=4))
def test_arguments_that_are_no_paths_are_kept(args: list[str]) -> None:
    argv = ["/usr/bin/python3", *(f"\0{a}" if len(a) % 2 else f"-{a}" for a in args)]
    assert absolute_argv(argv) == argv
