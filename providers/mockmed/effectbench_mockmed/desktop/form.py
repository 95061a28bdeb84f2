"""MockMed's encounter form as its desktop client shows it: one definition for the
client that draws it and the two drivers that work it (through the accessibility tree
and through pixels).

Standard library only: the client (``gtk_client.py``, run by the system interpreter
with ``-I``) imports this file from its own directory, the harness as
``effectbench_mockmed.desktop.form``.
"""

from __future__ import annotations

from typing import Final

FIELDS: Final = {
    "patient_id": "Patient",
    "type": "Type",
    "status": "Status",
    "note": "Note",
    "key": "Referral reference",
}
"""Form field -> its label left of the widget, which is also the widget's accessible
name."""
COMBOS: Final = ("patient_id", "type", "status")
"""The fields chosen from a list (combo boxes), in the order the form shows them."""
ID_SEPARATOR: Final = " — "
"""Between a patient's label and chart id in the Patient list, as a chart list shows it."""
HTTP_TIMEOUT_S: Final = 30.0
"""How long the client waits for the server's answer to Save before it shows an error."""
SAVE_TIMEOUT_S: Final = HTTP_TIMEOUT_S + 5.0
"""How long a driver waits for the banner after Save: longer than the client's own
timeout, so a server that never answers still ends in the client's error banner."""
