"""OCR in-process: tesseract's English model found where the distribution put it, or
one line saying what to install; a read gives the words and where they are."""

from __future__ import annotations

from pathlib import Path

import pytest
from PIL import Image, ImageDraw, ImageFont

from effectbench.displays.frame import Box, Frame
from effectbench.displays.ocr import OcrUnavailable, read_text, tessdata

FONT = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf"


def _frame(lines: list[tuple[int, int, str]]) -> Frame:
    """A 1024x720 screen of the root window's grey with a white window holding ``lines``."""
    image = Image.new("RGB", (1024, 720), (80, 80, 80))
    draw = ImageDraw.Draw(image)
    draw.rectangle((100, 100, 600, 400), fill=(246, 245, 244))
    font = ImageFont.truetype(FONT, 13)
    for x, y, text in lines:
        draw.text((x, y), text, fill=(30, 30, 30), font=font)
    return Frame(1024, 720, image.tobytes("raw", "BGRX"))


def test_a_read_gives_each_line_and_where_its_words_are() -> None:
    frame = _frame(
        [(120, 120, "New encounter"), (120, 200, "Referral reference"), (400, 300, "Save")]
    )
    reading = read_text(frame)
    assert reading.area == Box(100, 100, 501, 301)
    assert [line.text for line in reading.lines] == ["New encounter", "Referral reference", "Save"]
    save = reading.find("save")
    assert save is not None and 398 <= save.x <= 404 and 298 <= save.y <= 306
    assert reading.find("Referral reference") is not None and reading.find("Cancel") is None


def test_reads_from_several_threads_agree() -> None:
    """Engines are lent one read at a time: reads side by side give what one gives."""
    import concurrent.futures

    frame = _frame([(120, 120 + 30 * i, f"Field number {i}") for i in range(6)])
    alone = read_text(frame).text
    with concurrent.futures.ThreadPoolExecutor(4) as threads:
        together = list(threads.map(lambda _: read_text(frame).text, range(8)))
    assert alone.count("Field number") == 6
    assert together == [alone] * 8


def test_a_host_without_the_model_gets_one_line_saying_what_to_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TESSDATA_PREFIX", str(tmp_path))
    with pytest.raises(OcrUnavailable) as caught:
        tessdata()
    message = str(caught.value)
    assert "\n" not in message
    assert "apt-get install tesseract-ocr-eng" in message and str(tmp_path) in message


def test_the_model_is_found_where_the_distribution_put_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TESSDATA_PREFIX", raising=False)
    assert (tessdata() / "eng.traineddata").is_file()
