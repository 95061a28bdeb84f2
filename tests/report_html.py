"""Reading a report's filmstrips in tests: the page parsed with html.parser, not string
matching, into each frame's image, marks and actions."""

from __future__ import annotations

import base64
import hashlib
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import attrs

_VOID = frozenset({"img", "br", "meta", "link", "input", "hr", "col", "source", "wbr"})


@attrs.define
class Node:
    tag: str
    attrs: dict[str, str]
    parts: list[Node | str] = attrs.field(factory=list)
    """Child elements and text, in document order."""

    @property
    def children(self) -> list[Node]:
        return [p for p in self.parts if isinstance(p, Node)]

    def all(self, tag: str, cls: str | None = None) -> list[Node]:
        """Every descendant with this tag (and class)."""
        out: list[Node] = []
        for c in self.children:
            if c.tag == tag and (cls is None or cls in c.attrs.get("class", "").split()):
                out.append(c)
            out.extend(c.all(tag, cls))
        return out

    def content(self) -> str:
        return "".join(p if isinstance(p, str) else p.content() for p in self.parts)


class _Tree(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.root = Node("#root", {})
        self.stack = [self.root]

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        node = Node(tag, {k: v or "" for k, v in attrs})
        self.stack[-1].parts.append(node)
        if tag not in _VOID:
            self.stack.append(node)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.stack[-1].parts.append(Node(tag, {k: v or "" for k, v in attrs}))

    def handle_endtag(self, tag: str) -> None:
        if tag in _VOID:
            return
        for i in range(len(self.stack) - 1, 0, -1):
            if self.stack[i].tag == tag:
                del self.stack[i:]
                return

    def handle_data(self, data: str) -> None:
        self.stack[-1].parts.append(data)


def parse(path: Path) -> Node:
    tree = _Tree()
    tree.feed(path.read_text("utf-8"))
    return tree.root


@attrs.frozen
class FrameView:
    """One frame as the page shows it."""

    attrs: dict[str, str]
    image_sha256: str | None
    """The sha256 of the embedded image's bytes, None when no image is shown."""
    view_box: str | None
    marks: list[dict[str, str]]
    """Each mark's data attributes, plus its circle's cx/cy when it has one."""
    actions: list[tuple[str, str]]
    """(data-kind, caption) of each action listed on the frame."""


def _image_sha(node: Node) -> str | None:
    imgs = node.all("img")
    assert len(imgs) <= 1
    if not imgs:
        return None
    head, _, data = imgs[0].attrs["src"].partition(",")
    assert head.startswith("data:image/") and head.endswith(";base64"), head
    return hashlib.sha256(base64.b64decode(data)).hexdigest()


def _marks(node: Node) -> list[dict[str, str]]:
    out = []
    for g in node.all("g", "fs-mark"):
        mark = dict(g.attrs)
        circles = g.all("circle")
        if circles:
            mark["cx"], mark["cy"] = circles[0].attrs["cx"], circles[0].attrs["cy"]
        out.append(mark)
    return out


def filmstrip(report: Path, episode_id: str) -> list[FrameView]:
    """The frames of one episode's filmstrip, in page order ([] when it has none)."""
    details: list[Any] = [
        d for d in parse(report).all("details") if d.attrs.get("data-episode") == episode_id
    ]
    assert len(details) == 1, f"{episode_id} has no drill-down"
    strips = details[0].all("div", "filmstrip")
    if not strips:
        return []
    frames = []
    for li in strips[0].all("li", "fs-frame"):
        svgs = li.all("svg")
        frames.append(
            FrameView(
                dict(li.attrs),
                _image_sha(li),
                svgs[0].attrs.get("viewbox") if svgs else None,
                _marks(li),
                [(a.attrs["data-kind"], a.content().strip()) for a in li.all("li")],
            )
        )
    return frames
