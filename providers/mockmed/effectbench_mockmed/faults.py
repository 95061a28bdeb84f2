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
