"""The viewer's path gate (effectbench/viewer/paths.py): whatever a URL says, the file it
names is inside the viewed folder or there is none."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from effectbench.viewer.paths import inside

SEGMENTS = st.sampled_from(
    ["..", ".", "", "run", "ok.txt", "out", "%2e%2e", ".hidden", "..\\..", "\x00", "~", "/"]
)
PATHS = st.one_of(
    st.text(),
    st.lists(SEGMENTS, max_size=8).map("/".join),
    st.lists(st.one_of(SEGMENTS, st.text(max_size=6)), max_size=8).map("/".join),
)


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("gate")
    (base / "secret.txt").write_text("secret")
    viewed = base / "runs"
    (viewed / "run").mkdir(parents=True)
    (viewed / "run" / "ok.txt").write_text("ok")
    os.symlink(base, viewed / "out")
    os.symlink(base / "secret.txt", viewed / "run" / "escape.txt")
    return viewed


def _within(path: Path, root: Path) -> bool:
    real, base = os.path.realpath(path), os.path.realpath(root)
    return real == base or real.startswith(base + os.sep)


@given(path=PATHS)
def test_a_path_never_names_a_file_outside_the_folder(root: Path, path: str) -> None:
    got = inside(root, path)
    assert got is None or _within(got, root)


@pytest.mark.parametrize(
    "path",
    [
        "../secret.txt",
        "/../secret.txt",
        "run/../../secret.txt",
        "out/secret.txt",
        "run/escape.txt",
        "run/..\\..\\secret.txt",
        "run/ok.txt\x00",
        ".hidden",
        "run/.ok.txt",
    ],
)
def test_traversal_links_and_hidden_names_are_refused(root: Path, path: str) -> None:
    assert inside(root, path) is None


def test_a_file_of_the_folder_is_found(root: Path) -> None:
    assert inside(root, "/run/ok.txt") == Path(os.path.realpath(root / "run" / "ok.txt"))
    assert inside(root, "run//./ok.txt") == Path(os.path.realpath(root / "run" / "ok.txt"))
    assert inside(root, "/") == Path(os.path.realpath(root))
