"""JSON Schemas shipped with the package (so a third party can validate our logs)."""

from __future__ import annotations

from importlib import resources
from typing import Any

import orjson

__all__ = [
    "AGENT_PROTOCOL_SCHEMA_FILE",
    "EVENTS_SCHEMA_FILE",
    "load_agent_protocol_schema",
    "load_event_schema",
]

EVENTS_SCHEMA_FILE = "events.schema.json"
AGENT_PROTOCOL_SCHEMA_FILE = "agent-protocol.schema.json"


def load_event_schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of one event log line."""
    raw = resources.files(__package__).joinpath(EVENTS_SCHEMA_FILE).read_bytes()
    schema: dict[str, Any] = orjson.loads(raw)
    return schema


def load_agent_protocol_schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of one agent protocol message (docs/agent-protocol.md)."""
    raw = resources.files(__package__).joinpath(AGENT_PROTOCOL_SCHEMA_FILE).read_bytes()
    schema: dict[str, Any] = orjson.loads(raw)
    return schema
