"""JSON Schemas shipped with the package (so a third party can validate our logs)."""

from __future__ import annotations

from importlib import resources
from typing import Any

import orjson

__all__ = ["EVENTS_SCHEMA_FILE", "load_event_schema"]

EVENTS_SCHEMA_FILE = "events.schema.json"


def load_event_schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of one event log line."""
    raw = resources.files(__package__).joinpath(EVENTS_SCHEMA_FILE).read_bytes()
    schema: dict[str, Any] = orjson.loads(raw)
    return schema
