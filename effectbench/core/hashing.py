"""Content hashes of value types.

Apart from model.py because a hash is taken over the codec's unstructured form: model.py
defines the types, codec.py converts them, and this module sits above both.
"""

from __future__ import annotations

import hashlib

import orjson

from effectbench.core.codec import converter
from effectbench.core.model import AnyEffect


def content_hash(effect: AnyEffect) -> str:
    """A stable sha256 of the (resolved) contract, independent of dict order."""
    blob = orjson.dumps(converter.unstructure(effect), option=orjson.OPT_SORT_KEYS)
    return hashlib.sha256(blob).hexdigest()
