"""Edit one field of a submitted form without touching the other bytes.

A fault that strips a field must change exactly that field: re-encoding the whole
body would also change the boundary, the part headers or the percent-encoding the
product sees, and the test would no longer isolate the fault. So both encodings are
edited as a list of raw pieces: urlencoded pairs split on ``&``, multipart parts split
on the boundary delimiter. Only the pieces of the named fields are rewritten.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Final
from urllib.parse import quote_plus, unquote_plus

__all__ = ["Form", "parse_form"]

_BOUNDARY: Final = re.compile(r'boundary="?([^";]+)"?', re.IGNORECASE)
_NAME: Final = re.compile(rb'\bname="([^"]*)"', re.IGNORECASE)


class Form:
    """A form body as raw pieces; ``fields`` decodes, the editors rewrite in place."""

    def __init__(
        self, kind: str, pieces: list[bytes], joiner: bytes, boundary: bytes = b""
    ) -> None:
        self.kind = kind
        self._pieces = pieces
        self._joiner = joiner
        self._boundary = boundary

    # -- reading ---------------------------------------------------------------------

    def _name(self, i: int) -> str | None:
        piece = self._pieces[i]
        if self.kind == "urlencoded":
            if not piece:
                return None
            return unquote_plus(piece.split(b"=", 1)[0].decode("utf-8", "replace"))
        if i == 0 or i == len(self._pieces) - 1:
            return None  # preamble, closing "--" and epilogue
        head_end = piece.find(b"\r\n\r\n")
        m = _NAME.search(piece[: max(head_end, 0)])
        return None if m is None else m.group(1).decode("utf-8", "replace")

    def _value(self, i: int) -> str:
        piece = self._pieces[i]
        if self.kind == "urlencoded":
            raw = piece.split(b"=", 1)[1] if b"=" in piece else b""
            return unquote_plus(raw.decode("utf-8", "replace"))
        head_end = piece.find(b"\r\n\r\n")
        return piece[head_end + 4 : _content_end(piece)].decode("utf-8", "replace")

    def fields(self) -> list[tuple[str, str]]:
        """(name, value) of every field, in order (file parts decoded leniently)."""
        out = []
        for i in range(len(self._pieces)):
            name = self._name(i)
            if name is not None:
                out.append((name, self._value(i)))
        return out

    def get(self, name: str) -> str | None:
        for key, value in self.fields():
            if key == name:
                return value
        return None

    # -- editing ---------------------------------------------------------------------

    def _indices(self, names: Iterable[str]) -> list[int]:
        wanted = set(names)
        return [i for i in range(len(self._pieces)) if self._name(i) in wanted]

    def drop(self, names: Iterable[str]) -> list[str]:
        """Remove the named fields; returns the names actually removed."""
        hit = self._indices(names)
        gone = [self._name(i) or "" for i in hit]
        for i in reversed(hit):
            del self._pieces[i]
        return gone

    def set(self, name: str, value: str) -> bool:
        """Replace the value of every field called ``name``; False when there is none."""
        hit = self._indices([name])
        for i in hit:
            self._pieces[i] = self._with_value(self._pieces[i], value)
        return bool(hit)

    def blank(self, names: Iterable[str]) -> list[str]:
        """Empty the named fields (they are still sent); returns the names blanked."""
        hit = self._indices(names)
        for i in hit:
            self._pieces[i] = self._with_value(self._pieces[i], "")
        return [self._name(i) or "" for i in hit]

    def replace_values(self, old: str, new: str) -> list[str]:
        """Set every field whose value is exactly ``old`` to ``new``; returns their names."""
        hit = [
            i
            for i in range(len(self._pieces))
            if self._name(i) is not None and self._value(i) == old
        ]
        for i in hit:
            self._pieces[i] = self._with_value(self._pieces[i], new)
        return [self._name(i) or "" for i in hit]

    def _with_value(self, piece: bytes, value: str) -> bytes:
        if self.kind == "urlencoded":
            return piece.split(b"=", 1)[0] + b"=" + quote_plus(value).encode("ascii")
        head_end = piece.find(b"\r\n\r\n") + 4
        return piece[:head_end] + value.encode("utf-8") + piece[_content_end(piece) :]

    def to_bytes(self) -> bytes:
        return self._joiner.join(self._pieces)


def _content_end(part: bytes) -> int:
    """Where a multipart part's content ends (before the CRLF that precedes a delimiter)."""
    return len(part) - 2 if part.endswith(b"\r\n") else len(part)


def parse_form(content_type: str, body: bytes) -> Form | None:
    """The body as an editable form, or None when it is neither urlencoded nor multipart."""
    media = content_type.split(";", 1)[0].strip().lower()
    if media == "application/x-www-form-urlencoded":
        return Form("urlencoded", body.split(b"&"), b"&")
    if media == "multipart/form-data":
        m = _BOUNDARY.search(content_type)
        if m is None:
            return None
        delimiter = b"--" + m.group(1).encode("latin-1")
        return Form("multipart", body.split(delimiter), delimiter, m.group(1).encode("latin-1"))
    return None
