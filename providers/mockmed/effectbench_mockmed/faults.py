"""How the MockMed product misbehaves in each anchor mode.

This is product behaviour, not harness or arm logic: the server consults it when a
submission arrives, so every arm (and every request path) meets the same fault.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from types import MappingProxyType
from typing import Final

import attrs


class StoreFault(StrEnum):
    """What happens to one delivered write inside the store."""

    NONE = "none"
    """The row is stored as submitted."""
    EMPTY_NOTE = "empty_note"
    """Partial save: the row lands but the note column is lost."""
    DROP = "drop"
    """Nothing is stored (the backend rejected the write)."""
    WIPE_PATIENT = "wipe_patient"
    """Stale overwrite: the patient's existing rows are replaced by a stale copy (i.e. wiped)."""


@attrs.frozen
class Fault:
    """The product's behaviour for one submission in a given mode."""

    deliveries: int
    """How many times the UI delivers the write to the backend (2 = double submit)."""
    store: StoreFault
    honors_key: bool
    """Whether the backend skips a write whose idempotency key it already holds."""
    banner_saved: bool
    status: int
    message: str
    retarget: str | None = None
    """Store the row under this patient instead of the submitted one (a wrong record)."""
    homonym: bool = False
    """Resolve the submitted patient by display name and land on the newest chart of that
    name (for the referred patient p1, its homonym)."""
    retype: str | None = None
    """Store the row with this encounter type instead of the submitted one."""
    stray_billing: bool = False
    """Also insert a billing row for the encounter: a side write the encounters read path
    never shows."""
    hang_s: float = 0.0
    """After committing, wait this long before answering (the client gives up first)."""


FAULTS: Final[Mapping[str, Fault]] = MappingProxyType(
    {
        "ok": Fault(1, StoreFault.NONE, False, True, 200, "Saved"),
        "partial": Fault(1, StoreFault.EMPTY_NOTE, False, True, 200, "Saved"),
        "duplicate": Fault(2, StoreFault.NONE, False, True, 200, "Saved"),
        "timeout": Fault(
            1, StoreFault.NONE, False, False, 504, "The server took too long to answer; try again"
        ),
        "optimistic": Fault(1, StoreFault.DROP, False, True, 200, "Saved"),
        "session": Fault(
            1, StoreFault.DROP, False, False, 401, "Your session expired; sign in again"
        ),
        "stale": Fault(1, StoreFault.WIPE_PATIENT, False, True, 200, "Saved"),
        "double": Fault(2, StoreFault.NONE, False, True, 200, "Saved"),
        "idempotent": Fault(2, StoreFault.NONE, True, True, 200, "Saved"),
    }
)

FULL_FAULTS: Final[Mapping[str, Fault]] = MappingProxyType(
    {
        **FAULTS,
        "homonym": Fault(1, StoreFault.NONE, False, True, 200, "Saved", homonym=True),
        "noop": Fault(1, StoreFault.DROP, False, True, 200, "Saved"),
        "wrong_type": Fault(1, StoreFault.NONE, False, True, 200, "Saved", retype="Follow-up"),
    }
)
"""The full pack's modes: the anchor's nine unchanged, plus C6 and C7 behaviours."""

LADDER_HANG_S: Final = 1.5
"""How long the ladder's ``timeout`` mode hangs after committing; the ladder's form
driver gives up well before (see ``packs_ladder.SUBMIT_TIMEOUT_S``)."""

LADDER_FAULTS: Final[Mapping[str, Fault]] = MappingProxyType(
    {
        "ok": Fault(1, StoreFault.NONE, False, True, 200, "Saved"),
        "no_persist": Fault(1, StoreFault.DROP, False, True, 200, "Saved"),
        "partial": Fault(1, StoreFault.EMPTY_NOTE, False, True, 200, "Saved"),
        "duplicate": Fault(2, StoreFault.NONE, False, True, 200, "Saved"),
        "wrong_record": Fault(1, StoreFault.NONE, False, True, 200, "Saved", retarget="p2"),
        "stale": Fault(1, StoreFault.WIPE_PATIENT, False, True, 200, "Saved"),
        "collateral_unaudited": Fault(
            1, StoreFault.NONE, False, True, 200, "Saved", stray_billing=True
        ),
        "optimistic": Fault(
            1,
            StoreFault.DROP,
            False,
            False,
            409,
            "Someone else changed this chart; reload and retry",
        ),
        "session": Fault(
            1, StoreFault.DROP, False, False, 401, "Your session expired; sign in again"
        ),
        "timeout": Fault(1, StoreFault.NONE, False, True, 200, "Saved", hang_s=LADDER_HANG_S),
    }
)
"""The measured read-path ladder's ten scenarios. Unlike the anchor, ``optimistic``
answers HTTP 409 (no saved banner) and ``timeout`` really hangs after its commit."""
