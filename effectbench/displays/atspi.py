"""AT-SPI over D-Bus: read an application's accessibility tree and act through it.

The desktop substrate's channel (docs/substrates.md). It speaks the AT-SPI D-Bus
protocol itself (dbus-fast, asyncio) on one display's accessibility bus, so the harness
needs neither GObject introspection nor the system interpreter to read a GTK window, and
a connection reaches that display's applications only. What it gives is what a screen
reader gets: each node's role, name, description, states, text or selected value and
actions; what it does is what a screen reader can do: press an action, set an editable
text, select a child of a selection (a combo box's item).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator, Sequence
from typing import Any, Final

import attrs

from effectbench.displays.tools import DisplaysUnavailable

__all__ = ["AccessibilityBus", "AccessibilityError", "Node", "Ref"]

ROOT_PATH: Final = "/org/a11y/atspi/accessible/root"
REGISTRY: Final = "org.a11y.atspi.Registry"
ACCESSIBLE: Final = "org.a11y.atspi.Accessible"
TEXT: Final = "org.a11y.atspi.Text"
EDITABLE: Final = "org.a11y.atspi.EditableText"
ACTION: Final = "org.a11y.atspi.Action"
SELECTION: Final = "org.a11y.atspi.Selection"
VALUE: Final = "org.a11y.atspi.Value"
COMPONENT: Final = "org.a11y.atspi.Component"
PROPERTIES: Final = "org.freedesktop.DBus.Properties"
MAX_NODES: Final = 2_000
"""A tree bigger than this is cut (an application's tree is walked whole per read)."""
STATES: Final = (
    "invalid", "active", "armed", "busy", "checked", "collapsed", "defunct", "editable",
    "enabled", "expandable", "expanded", "focusable", "focused", "has_tooltip",
    "horizontal", "iconified", "modal", "multi_line", "multiselectable", "opaque",
    "pressed", "resizable", "selectable", "selected", "sensitive", "showing",
    "single_line", "stale", "transient", "vertical", "visible", "manages_descendants",
    "indeterminate", "required", "truncated", "animated", "invalid_entry",
    "supports_autocompletion", "selectable_text", "is_default", "visited", "checkable",
    "has_popup", "read_only",
)  # fmt: skip
"""AT-SPI's StateType, in bit order (atspi-constants.h)."""


class AccessibilityError(Exception):
    """The accessibility bus or an application on it did not answer as asked (no such
    node, action or bus): the driver or arm that asked fails its episode."""


@attrs.frozen
class Ref:
    """Where one accessible object lives: its application's bus name and object path."""

    bus: str
    path: str


@attrs.frozen
class Node:
    """One accessible object as a screen reader sees it, with its subtree."""

    ref: Ref
    role: str
    name: str
    description: str = ""
    accessible_id: str = ""
    states: frozenset[str] = frozenset()
    value: str | None = None
    """An editable or read-only text's contents, a selection's selected item's name or
    a value's number as text; None for an object with none of these."""
    actions: tuple[str, ...] = ()
    interfaces: frozenset[str] = frozenset()
    children: tuple[Node, ...] = ()

    def walk(self) -> Iterator[Node]:
        """This node, then its descendants depth first."""
        yield self
        for child in self.children:
            yield from child.walk()

    def find(self, *, role: str | None = None, name: str | None = None,
             accessible_id: str | None = None) -> Node | None:  # fmt: skip
        """The first node (depth first) matching every criterion given."""
        for node in self.walk():
            if role is not None and node.role != role:
                continue
            if name is not None and node.name != name:
                continue
            if accessible_id is not None and node.accessible_id != accessible_id:
                continue
            return node
        return None

    def as_json(self) -> dict[str, Any]:
        """The node as plain data (what a protocol agent receives)."""
        out: dict[str, Any] = {"role": self.role, "name": self.name, "path": self.ref.path}
        if self.description:
            out["description"] = self.description
        if self.accessible_id:
            out["id"] = self.accessible_id
        out["states"] = sorted(self.states)
        if self.value is not None:
            out["value"] = self.value
        if self.actions:
            out["actions"] = list(self.actions)
        if self.children:
            out["children"] = [c.as_json() for c in self.children]
        return out


def _states(words: Sequence[int]) -> frozenset[str]:
    out = set()
    for word_index, word in enumerate(words):
        for bit in range(32):
            if word & (1 << bit):
                index = word_index * 32 + bit
                if index < len(STATES):
                    out.add(STATES[index])
    return frozenset(out)


class _Budget:
    """How many more nodes one read may visit (a runaway tree is cut, not walked)."""

    def __init__(self, nodes: int) -> None:
        self.left = nodes

    def take(self, refs: list[Ref]) -> list[Ref]:
        granted = refs[: max(self.left, 0)]
        self.left -= len(granted)
        return granted


class AccessibilityBus:
    """One connection to a display's accessibility bus (``Display.a11y_bus``)."""

    def __init__(self, address: str) -> None:
        self._address = address
        self._bus: Any = None

    async def connect(self) -> AccessibilityBus:
        try:
            from dbus_fast.aio import MessageBus
        except ImportError as exc:
            raise DisplaysUnavailable(
                "the desktop channel needs dbus-fast: pip install 'effectbench[desktop]'"
            ) from exc

        try:
            self._bus = await MessageBus(bus_address=self._address).connect()
        except Exception as exc:
            raise AccessibilityError(
                f"cannot connect to the accessibility bus {self._address}: {exc}"
            ) from exc
        return self

    async def close(self) -> None:
        bus, self._bus = self._bus, None
        if bus is not None:
            bus.disconnect()
            await bus.wait_for_disconnect()

    async def _call(
        self, bus: str, path: str, interface: str, member: str,
        signature: str = "", body: Sequence[Any] = (),
    ) -> list[Any]:  # fmt: skip
        from dbus_fast import Message, MessageType

        if self._bus is None:
            raise AccessibilityError("the accessibility bus is not connected: connect() first")
        msg = Message(destination=bus, path=path, interface=interface, member=member,
                      signature=signature, body=list(body))  # fmt: skip
        reply = await self._bus.call(msg)
        if reply.message_type is MessageType.ERROR:
            detail = reply.body[0] if reply.body else ""
            raise AccessibilityError(f"{interface}.{member} on {path}: {reply.error_name} {detail}")
        return list(reply.body)

    async def application(self, pid: int) -> str | None:
        """The bus name of the application process ``pid`` registered, or None (yet)."""
        apps = await self._call(REGISTRY, ROOT_PATH, ACCESSIBLE, "GetChildren")
        for name, _path in apps[0]:
            try:
                got = await self._call(
                    "org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus",
                    "GetConnectionUnixProcessID", "s", [name],
                )  # fmt: skip
            except AccessibilityError:
                continue  # it left the bus meanwhile
            if got[0] == pid:
                return str(name)
        return None

    async def tree(self, bus: str) -> Node:
        """The application's whole tree, read now (an application's root object)."""
        return await self._node(Ref(bus, ROOT_PATH), _Budget(MAX_NODES))

    async def node(self, ref: Ref) -> Node:
        """One object read now, without its children (to watch it change)."""
        return await self._node(ref, _Budget(0))

    async def _node(self, ref: Ref, budget: _Budget) -> Node:
        props, role, state, ifaces, kids = await asyncio.gather(
            self._call(ref.bus, ref.path, PROPERTIES, "GetAll", "s", [ACCESSIBLE]),
            self._call(ref.bus, ref.path, ACCESSIBLE, "GetRoleName"),
            self._call(ref.bus, ref.path, ACCESSIBLE, "GetState"),
            self._call(ref.bus, ref.path, ACCESSIBLE, "GetInterfaces"),
            self._call(ref.bus, ref.path, ACCESSIBLE, "GetChildren"),
        )
        values = {k: v.value for k, v in props[0].items()}
        interfaces = frozenset(str(i) for i in ifaces[0])
        child_refs = budget.take([Ref(str(b), str(p)) for b, p in kids[0]])
        value, actions, children = await asyncio.gather(
            self._value(ref, interfaces),
            self._actions(ref, interfaces),
            asyncio.gather(*(self._node(c, budget) for c in child_refs)),
        )
        return Node(
            ref=ref,
            role=str(role[0]),
            name=str(values.get("Name") or ""),
            description=str(values.get("Description") or ""),
            accessible_id=str(values.get("AccessibleId") or ""),
            states=_states(state[0]),
            value=value,
            actions=actions,
            interfaces=interfaces,
            children=tuple(children),
        )

    async def _value(self, ref: Ref, interfaces: frozenset[str]) -> str | None:
        if TEXT in interfaces:
            got = await self._call(ref.bus, ref.path, TEXT, "GetText", "ii", [0, -1])
            return str(got[0])
        if SELECTION in interfaces:
            count = await self._call(ref.bus, ref.path, PROPERTIES, "Get", "ss",
                                     [SELECTION, "NSelectedChildren"])  # fmt: skip
            if not count[0].value:
                return ""
            child = await self._call(ref.bus, ref.path, SELECTION, "GetSelectedChild", "i", [0])
            bus, path = child[0]
            name = await self._call(str(bus), str(path), PROPERTIES, "Get", "ss",
                                    [ACCESSIBLE, "Name"])  # fmt: skip
            return str(name[0].value)
        if VALUE in interfaces:
            got = await self._call(ref.bus, ref.path, PROPERTIES, "Get", "ss",
                                   [VALUE, "CurrentValue"])  # fmt: skip
            return f"{got[0].value:g}"
        return None

    async def _actions(self, ref: Ref, interfaces: frozenset[str]) -> tuple[str, ...]:
        if ACTION not in interfaces:
            return ()
        got = await self._call(ref.bus, ref.path, ACTION, "GetActions")
        return tuple(str(a[0]).lower() for a in got[0])

    async def extents(self, node: Node) -> tuple[int, int, int, int] | None:
        """(x, y, width, height) of ``node`` on the screen, None when it has no
        component (nothing on screen to point at)."""
        if COMPONENT not in node.interfaces:
            return None
        got = await self._call(node.ref.bus, node.ref.path, COMPONENT, "GetExtents", "u", [0])
        x, y, width, height = got[0]
        return int(x), int(y), int(width), int(height)

    async def do_action(self, node: Node, action: str) -> None:
        """Press ``action`` (e.g. ``click``) of ``node``."""
        if action not in node.actions:
            raise AccessibilityError(f"{node.role} {node.name!r} has no action {action!r}")
        index = node.actions.index(action)
        await self._call(node.ref.bus, node.ref.path, ACTION, "DoAction", "i", [index])

    async def set_text(self, node: Node, text: str) -> None:
        """Replace an editable text's contents, as typing over it would."""
        await self._change(node, EDITABLE, "SetTextContents", "s", text, "editable text")

    async def select(self, node: Node, index: int) -> None:
        """Select the ``index``-th choice of a selection (a combo box's item)."""
        await self._change(node, SELECTION, "SelectChild", "i", index, "a selection")

    async def _change(
        self, node: Node, interface: str, member: str, signature: str, arg: object, what: str
    ) -> None:
        if interface not in node.interfaces:
            raise AccessibilityError(f"{node.role} {node.name!r} is not {what}")
        ok = await self._call(node.ref.bus, node.ref.path, interface, member, signature, [arg])
        if not ok[0]:
            raise AccessibilityError(f"{node.role} {node.name!r} refused {arg!r}")
