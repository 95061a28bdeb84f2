"""A tiny GTK window for the pixels-only toolkit's tests: a label with known text, an
entry and a button; Save shows "Saved: <what the entry held>" in the label below.

Run by the system's python3 (python3-gi, gir1.2-gtk-3.0) on a harness display.
"""

import sys

import gi

gi.require_version("Gtk", "3.0")
from gi.repository import Gtk


def main() -> None:
    window = Gtk.Window(title="form")
    window.set_default_size(480, 240)
    window.move(40, 40)
    grid = Gtk.Grid(row_spacing=12, column_spacing=12, margin=24)
    grid.attach(Gtk.Label(label=sys.argv[1] if len(sys.argv) > 1 else "Patient note"), 0, 0, 1, 1)
    entry = Gtk.Entry(width_chars=24)
    grid.attach(entry, 1, 0, 1, 1)
    button = Gtk.Button(label="Save")
    grid.attach(button, 1, 1, 1, 1)
    result = Gtk.Label(label="Nothing saved")
    grid.attach(result, 0, 2, 2, 1)
    button.connect("clicked", lambda _b: result.set_text(f"Saved: {entry.get_text()}"))
    window.add(grid)
    window.connect("destroy", Gtk.main_quit)
    window.show_all()
    Gtk.main()


main()
