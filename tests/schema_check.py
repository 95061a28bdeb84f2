"""Test helpers shared by several test modules (moved from test_log.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson

from effectbench.core import events as ev


def lines_of(path: Path) -> list[bytes]:
    return path.read_bytes().splitlines(keepends=True)


def _check(schema: dict[str, Any], value: Any, root: dict[str, Any], where: str = "$") -> list[str]:
    """A tiny validator for exactly the JSON Schema keywords our schema uses."""
    if "$ref" in schema:
        schema = root["$defs"][schema["$ref"].removeprefix("#/$defs/")]
    errors: list[str] = []
    kinds = {
        "object": lambda x: isinstance(x, dict),
        "array": lambda x: isinstance(x, list),
        "string": lambda x: isinstance(x, str),
        "integer": lambda x: type(x) is int,
        "number": lambda x: type(x) in (int, float),
        "boolean": lambda x: type(x) is bool,
        "null": lambda x: x is None,
    }
    if "type" in schema:
        types = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
        if not any(kinds[t](value) for t in types):
            return [f"{where}: {value!r} is not {types}"]
    if "const" in schema and value != schema["const"]:
        errors.append(f"{where}: {value!r} != {schema['const']!r}")
    if "enum" in schema and value not in schema["enum"]:
        errors.append(f"{where}: {value!r} not in {schema['enum']}")
    if "minimum" in schema and type(value) in (int, float) and value < schema["minimum"]:
        errors.append(f"{where}: {value} < {schema['minimum']}")
    if "maximum" in schema and type(value) in (int, float) and value > schema["maximum"]:
        errors.append(f"{where}: {value} > {schema['maximum']}")
    low = schema.get("exclusiveMinimum")
    if low is not None and type(value) in (int, float) and value <= low:
        errors.append(f"{where}: {value} <= {low}")
    if "maxLength" in schema and isinstance(value, str) and len(value) > schema["maxLength"]:
        errors.append(f"{where}: {len(value)} characters > {schema['maxLength']}")
    if "pattern" in schema and isinstance(value, str):
        import re

        if not re.search(schema["pattern"], value):
            errors.append(f"{where}: {value!r} !~ {schema['pattern']}")
    if isinstance(value, dict):
        errors += [f"{where}: missing {k}" for k in schema.get("required", []) if k not in value]
        props = schema.get("properties", {})
        for k, v in value.items():
            if k in props:
                errors += _check(props[k], v, root, f"{where}.{k}")
            elif isinstance(schema.get("additionalProperties"), dict):
                errors += _check(schema["additionalProperties"], v, root, f"{where}.{k}")
            elif schema.get("additionalProperties") is False:
                errors.append(f"{where}: unexpected {k}")
    if isinstance(value, list) and "items" in schema:
        for i, item in enumerate(value):
            errors += _check(schema["items"], item, root, f"{where}[{i}]")
    if "oneOf" in schema:
        matches = [b for b in schema["oneOf"] if not _check(b, value, root, where)]
        if len(matches) != 1:
            errors.append(f"{where}: matches {len(matches)} of oneOf")
    return errors


def assert_every_line_is_a_typed_event(path: Path) -> None:
    """Each line's data is, byte for byte, the data of the typed event of its type built
    from it: nothing in the log was written as a hand-built dict."""
    for raw in lines_of(path):
        line = orjson.loads(raw)
        typed = ev.EVENT_TYPES[line["type"]](**line["data"])
        assert orjson.dumps(ev.event_data(typed)) == orjson.dumps(line["data"]), raw
