"""Content hashes of value types.

A leaf: it hashes a value's JSON form (``plain()``, the form the codec writes), so it
imports no model type and model.py can offer the deprecated ``Effect.content_hash()``
without an import cycle.
"""

from __future__ import annotations

import hashlib
from typing import Any, Protocol

import orjson


class HasPlainForm(Protocol):
    def plain(self) -> Any: ...


def content_hash(value: HasPlainForm) -> str:
    """A stable sha256 of the (resolved) contract, independent of dict order."""
    blob = orjson.dumps(value.plain(), option=orjson.OPT_SORT_KEYS)
    return hashlib.sha256(blob).hexdigest()
