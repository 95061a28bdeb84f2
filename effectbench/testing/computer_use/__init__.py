"""A deterministic stand-in for a computer-use model, for tests and benchmarks.

A real vision model reads the screenshot; the stand-in reads what the page showed when
that screenshot was taken. ``SightedScreen`` is the harness's ``PlaywrightScreen`` that,
at each capture, also records the page's visible layout (element boxes, field values,
the banner, the records table) in a ``Sight`` under the screenshot's sha256. The
stand-in server (``StandIn``) hashes each image it is sent and looks it up: coordinates
come from the rendered page's element boxes, never from constants, and an image it was
never shown taken leaves it blind (it halts). Scripts (``scripts``) are chosen by the
request's model name: ``trust-banner`` (fill, save, trust the banner) and
``check-records`` (open the records page before and after, and claim success only when
it shows the one new record with the payload's note). Each works on MockMed's pages and
on Roundup's (``roundup``: after the save ``check-records`` opens the saved issue and
checks its fields and the note); the task's text says which product it is.

Where there is no page (a remote display: the arm's screen is a framebuffer over VNC) a
``Sight(pixels=True)`` lets the stand-in read the PNG it is sent itself, with OCR and
the pixel toolkit (``remote``): ``trust-banner`` fills MockMed's desktop client and
trusts its banner's colour, ``check-records`` refuses (the client has no records page).
"""

from __future__ import annotations

from effectbench.testing.computer_use.remote import REMOTE_SCRIPTS
from effectbench.testing.computer_use.scripts import SCRIPTS
from effectbench.testing.computer_use.server import StandIn
from effectbench.testing.computer_use.sight import Sight, SightedScreen, View

__all__ = ["REMOTE_SCRIPTS", "SCRIPTS", "Sight", "SightedScreen", "StandIn", "View"]
