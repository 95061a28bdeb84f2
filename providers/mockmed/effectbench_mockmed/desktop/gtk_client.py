"""MockMed's native desktop client: the encounter form as a GTK 3 window.

Run by the system interpreter (Debian's python3-gi and gir1.2-gtk-3.0), not the
harness's: it imports only the standard library and GTK, and is started per episode on
that episode's display (``python3 gtk_client.py BASE_URL READY_FD``). It is a client of
the same MockMed episode server as the web page: it reads the form's choices from the
episode's form page and saves by POSTing the form to ``encounters``, so every fault the
server injects reaches it as it reaches a browser, and the banner it shows is the text
and the kind (saved or error) of the banner the web page shows.

What an assistive technology sees (AT-SPI, through GTK's accessibility bridge): a frame
named "MockMed encounters"; combo boxes named "Patient", "Type" (and "Status" where the
product has one) whose menu items are the choices; text fields named "Note" and
"Referral reference"; a push button "Save"; and the banner, a label whose accessible id
is "banner", whose name is its text and whose description is "saved" or "error" once
the window shows it (the description is set after the frame with the text is painted). A
patient's chart id follows its label after " — ", as a desktop chart list shows it.
Once the form is on screen the client writes ``ready`` on READY_FD.
"""

from __future__ import annotations

import html
import os
import re
import sys
import threading
from html.parser import HTMLParser
from typing import TYPE_CHECKING
from urllib.parse import urlencode, urlsplit

# Started with -I -S (no site: a faster start): Debian's GTK bindings are found here,
# and the form's definition beside this file (-I puts not even that on the path).
sys.path.append("/usr/lib/python3/dist-packages")
sys.path.append(os.path.dirname(os.path.abspath(__file__)))
# The client speaks plain HTTP to 127.0.0.1: without ssl, http.client loads no OpenSSL
# (3.5 MiB of RSS and ~10 ms of start-up per display).
sys.modules["ssl"] = None  # type: ignore[assignment]
import http.client

import gi

gi.require_version("Gtk", "3.0")
from gi.repository import GLib, Gtk

if TYPE_CHECKING:  # the same file, as the harness's type checker finds it
    from effectbench_mockmed.desktop.form import COMBOS, FIELDS, HTTP_TIMEOUT_S, ID_SEPARATOR
else:
    from form import COMBOS, FIELDS, HTTP_TIMEOUT_S, ID_SEPARATOR

BANNER = re.compile(r"<div id='banner' class='(saved|error)'>([^<]*)</div>")
CSS = b"""
#banner { padding: 8px 12px; font-weight: bold; border-radius: 4px; }
#banner.saved { background: #dff3e3; color: #14532d; }
#banner.error { background: #fde2e2; color: #7f1d1d; }
"""


class FormChoices(HTMLParser):
    """The ``<select>`` options of the episode's form page: {field: [(value, label)]}."""

    def __init__(self) -> None:
        super().__init__()
        self.choices: dict[str, list[tuple[str, str]]] = {}
        self._select: str | None = None
        self._value: str | None = None
        self._text = ""

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        named = dict(attrs)
        if tag == "select":
            self._select = named.get("name") or ""
            self.choices[self._select] = []
        elif tag == "option" and self._select is not None:
            self._value, self._text = named.get("value"), ""

    def handle_data(self, data: str) -> None:
        if self._select is not None:
            self._text += data

    def handle_endtag(self, tag: str) -> None:
        if tag == "option" and self._select is not None:
            label = self._text.strip()
            self.choices[self._select].append(
                (label if self._value is None else self._value, label)
            )
            self._value = None
        elif tag == "select":
            self._select = None


def _request(base_url: str, method: str, path: str, body: bytes | None) -> str:
    """One request to the episode server; the answer's page, whatever its status (an
    error page still carries its banner)."""
    url = urlsplit(base_url)
    conn = http.client.HTTPConnection(url.hostname or "127.0.0.1", url.port, timeout=HTTP_TIMEOUT_S)
    try:
        headers = {"Content-Type": "application/x-www-form-urlencoded"} if body else {}
        conn.request(method, url.path + path, body=body, headers=headers)
        return conn.getresponse().read().decode("utf-8", "replace")
    finally:
        conn.close()


def fetch_choices(base_url: str) -> dict[str, list[tuple[str, str]]]:
    parser = FormChoices()
    parser.feed(_request(base_url, "GET", "", None))
    return parser.choices


def post_form(base_url: str, values: dict[str, str]) -> tuple[str, str]:
    """POST the form as a browser does; (kind, text) of the banner the answer carries."""
    try:
        page = _request(base_url, "POST", "encounters", urlencode(values).encode())
    except (OSError, http.client.HTTPException) as exc:
        return "error", f"The server could not be reached: {exc}"
    found = BANNER.search(page)
    if found is None:
        return "error", "The server answered without a banner"
    return found.group(1), html.unescape(found.group(2))


class EncounterWindow(Gtk.Window):  # type: ignore[misc]
    def __init__(self, base_url: str, choices: dict[str, list[tuple[str, str]]]) -> None:
        super().__init__(title="MockMed encounters")
        self.set_default_size(640, 520)
        self._base_url = base_url
        self._values: dict[str, list[str]] = {}
        self._combos: dict[str, Gtk.ComboBoxText] = {}
        grid = Gtk.Grid(column_spacing=12, row_spacing=8, margin=16)
        self.add(grid)
        row = 0
        heading = Gtk.Label(label="New encounter", xalign=0)
        grid.attach(heading, 0, row, 2, 1)
        row += 1
        self.banner = Gtk.Label(label="", xalign=0)
        self.banner.set_name("banner")
        self.banner.get_accessible().set_accessible_id("banner")
        grid.attach(self.banner, 0, row, 2, 1)
        row += 1
        for field in COMBOS:
            if field not in choices:
                continue
            combo = Gtk.ComboBoxText()
            values = []
            for value, label in choices[field]:
                shown = label if field != "patient_id" else f"{label}{ID_SEPARATOR}{value}"
                combo.append_text(shown)
                values.append(value)
            combo.set_active(0 if values else -1)
            self._values[field] = values
            self._combos[field] = combo
            row = self._field(grid, row, FIELDS[field], combo)
        self.note = Gtk.TextView(wrap_mode=Gtk.WrapMode.WORD)
        self.note.set_size_request(-1, 80)
        row = self._field(grid, row, FIELDS["note"], self.note)
        self.key = Gtk.Entry()
        row = self._field(grid, row, FIELDS["key"], self.key)
        self.save = Gtk.Button(label="Save")
        self.save.connect("clicked", self._on_save)
        grid.attach(self.save, 1, row, 1, 1)

    @staticmethod
    def _field(grid: Gtk.Grid, row: int, title: str, widget: Gtk.Widget) -> int:
        label = Gtk.Label(label=title, xalign=0)
        label.set_mnemonic_widget(widget)
        widget.get_accessible().set_name(title)
        widget.set_hexpand(True)
        grid.attach(label, 0, row, 1, 1)
        grid.attach(widget, 1, row, 1, 1)
        return row + 1

    def form_values(self) -> dict[str, str]:
        out = {}
        for field, combo in self._combos.items():
            index = combo.get_active()
            out[field] = self._values[field][index] if index >= 0 else ""
        buffer = self.note.get_buffer()
        out["note"] = buffer.get_text(buffer.get_start_iter(), buffer.get_end_iter(), False)
        out["key"] = self.key.get_text()
        return out

    def _on_save(self, _button: Gtk.Button) -> None:
        values = self.form_values()
        self.save.set_sensitive(False)
        self._show("", "")
        worker = threading.Thread(target=self._submit, args=(values,), daemon=True)
        worker.start()

    def _submit(self, values: dict[str, str]) -> None:
        kind, text = post_form(self._base_url, values)
        GLib.idle_add(self._saved, kind, text)

    def _saved(self, kind: str, text: str) -> bool:
        self._show(kind, text)
        self.save.set_sensitive(True)
        return False

    def _show(self, kind: str, text: str) -> None:
        style = self.banner.get_style_context()
        for name in ("saved", "error"):
            style.remove_class(name)
        if kind:
            style.add_class(kind)
        accessible = self.banner.get_accessible()
        accessible.set_description("")
        self.banner.set_text(text)
        if kind:
            self._describe_after_paint(kind)

    def _describe_after_paint(self, kind: str) -> None:
        """The banner's kind, told once the frame that shows its text has been painted,
        so whoever reads it from the tree and then looks at the screen sees it there."""
        clock = self.banner.get_frame_clock()
        if clock is None:  # not on screen: nothing to wait for
            self.banner.get_accessible().set_description(kind)
            return
        handler = 0

        def painted(_clock: object) -> None:
            clock.disconnect(handler)
            self.banner.get_accessible().set_description(kind)

        handler = clock.connect("after-paint", painted)


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        print("usage: gtk_client.py BASE_URL READY_FD", file=sys.stderr)
        return 2
    base_url, ready_fd = argv[1], int(argv[2])
    GLib.set_prgname("mockmed-desktop")
    GLib.set_application_name("MockMed")
    choices = fetch_choices(base_url)
    provider = Gtk.CssProvider()
    provider.load_from_data(CSS)
    window = EncounterWindow(base_url, choices)
    Gtk.StyleContext.add_provider_for_screen(
        window.get_screen(), provider, Gtk.STYLE_PROVIDER_PRIORITY_APPLICATION
    )
    window.connect("destroy", Gtk.main_quit)
    window.show_all()

    def ready() -> bool:
        os.write(ready_fd, b"ready\n")
        os.close(ready_fd)
        return False

    GLib.idle_add(ready)
    Gtk.main()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
