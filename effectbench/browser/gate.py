"""One episode's network gate: the HTTP proxy its browser context must use.

The CDP hub creates each episode's context with ``proxyServer`` pointing here and
``<-loopback>`` in its bypass list, so every request the context makes, to loopback
too, comes through this proxy: navigations, redirects, subresources, ``fetch``,
WebSockets (tunnelled with ``CONNECT``). The gate forwards a request only to one of the
episode's product origins (``OriginPolicy``) and answers every other with 403, so the
browser reaches no other host and no other loopback port, whatever the agent tells it.
The agent cannot change a context's proxy: creating contexts is refused (``cdp_proxy``).

Each request gets a fresh connection to the product, told ``Connection: close``, and
the answer is relayed with ``Connection: close`` too: the browser's next request,
perhaps for another origin, comes on a new connection and is checked again.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from typing import Final

from effectbench.browser.policy import OriginPolicy, origin_of

BROWSER_FLAGS: Final = ("--force-webrtc-ip-handling-policy=disable_non_proxied_udp",)
"""What a gated browser is started with: WebRTC sends no UDP around the proxy."""
HEAD_LIMIT: Final = 64 * 1024
CONNECT_TIMEOUT_S: Final = 10.0
CHUNK: Final = 64 * 1024
_HOP: Final = frozenset({b"connection", b"proxy-connection", b"keep-alive", b"proxy-authorization"})


def _refusal(status: str, reason: str) -> bytes:
    body = f"effectbench: {reason}\n".encode()
    return (
        f"HTTP/1.1 {status}\r\nContent-Type: text/plain; charset=utf-8\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    ).encode() + body


def _closing(head: bytes, first_line: bytes) -> bytes:
    """``head`` with its first line replaced, hop-by-hop headers dropped and
    ``Connection: close`` added."""
    lines = head.split(b"\r\n")
    kept = [first_line]
    for line in lines[1:]:
        name = line.split(b":", 1)[0].strip().lower()
        if line and name not in _HOP:
            kept.append(line)
    return b"\r\n".join([*kept, b"Connection: close", b"", b""])


async def _pump(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Copy until end of stream, then half-close ``writer`` (when it can)."""
    try:
        while chunk := await reader.read(CHUNK):
            writer.write(chunk)
            await writer.drain()
        if writer.can_write_eof():
            writer.write_eof()
    except (ConnectionError, OSError):
        pass


class Gate:
    """The proxy of one episode's context, on its own loopback port."""

    def __init__(self, policy: OriginPolicy) -> None:
        self.policy = policy
        self._upstreams = {o: _address(o) for o in policy.origins}
        """Each allowed origin's (host, port), worked out once for the context."""
        self._tunnels = {o.split("://", 1)[1]: o for o in policy.origins}
        """A ``CONNECT`` target (``host:port``) -> the allowed origin it names."""
        self._refused_text = (
            f"is not one of this episode's product origins "
            f"({', '.join(sorted(policy.origins)) or 'none'})"
        )
        self._server: asyncio.Server | None = None
        self._open: set[asyncio.StreamWriter] = set()
        self.url = ""
        self.refused = 0
        """Requests refused so far (a figure for tests and logs)."""

    async def start(self) -> str:
        """Listen on 127.0.0.1 (a fresh port); the proxy URL the context is given."""
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        sock.bind(("127.0.0.1", 0))
        self._server = await asyncio.start_server(self._serve, sock=sock, limit=HEAD_LIMIT)
        self.url = f"http://127.0.0.1:{sock.getsockname()[1]}"
        return self.url

    async def stop(self) -> None:
        """Stop listening and drop every connection still open; idempotent."""
        server, self._server = self._server, None
        if server is not None:
            server.close()
        for writer in list(self._open):
            writer.close()
        self._open.clear()
        if server is not None:
            with contextlib.suppress(Exception):
                await server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._open.add(writer)
        upstream: asyncio.StreamWriter | None = None
        try:
            try:
                head = await reader.readuntil(b"\r\n\r\n")
            except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
                return
            parts = head.split(b"\r\n", 1)[0].split(b" ")
            if len(parts) != 3:
                writer.write(_refusal("400 Bad Request", "a request line has three parts"))
                return
            method, target, version = parts
            tunnel = method == b"CONNECT"
            up = await self._open_upstream(target.decode("latin-1"), writer, tunnel=tunnel)
            if up is None:
                return
            up_reader, upstream = up
            if tunnel:
                writer.write(b"HTTP/1.1 200 Connection Established\r\n\r\n")
            else:
                line = b" ".join((method, _path_of(target), version))
                upstream.write(_closing(head[:-4], line))
            # the request's body (or the tunnel's bytes) flows while the answer comes back;
            # done when the product is: it was told to close (or the tunnel ended)
            to_product = asyncio.ensure_future(_pump(reader, upstream))
            try:
                if tunnel or await _closing_reply(up_reader, writer):
                    await _pump(up_reader, writer)
            finally:
                to_product.cancel()
        except (ConnectionError, OSError):
            pass
        finally:
            for w in (upstream, writer):
                if w is not None:
                    w.close()
            self._open.discard(writer)

    async def _open_upstream(
        self, target: str, writer: asyncio.StreamWriter, *, tunnel: bool
    ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter] | None:
        """A connection to the target's origin when the policy allows it, else the
        refusal written to ``writer`` and None."""
        if tunnel:
            origin = self._tunnels.get(target.lower())
            what = target
        else:
            origin = origin_of(target)
            what = origin or target[:80]
        address = self._upstreams.get(origin) if origin is not None else None
        if origin is None or address is None:
            self.refused += 1
            writer.write(_refusal("403 Forbidden", f"{what} {self._refused_text}"))
            return None
        host, port = address
        try:
            return await asyncio.wait_for(
                asyncio.open_connection(host, port, limit=HEAD_LIMIT), CONNECT_TIMEOUT_S
            )
        except (OSError, TimeoutError):
            writer.write(_refusal("502 Bad Gateway", f"{origin} did not accept a connection"))
            return None


def _address(origin: str) -> tuple[str, int]:
    """The host (brackets off) and port of a ``scheme://host:port`` origin."""
    host, _, port = origin.split("://", 1)[1].rpartition(":")
    return host.strip("[]"), int(port)


def _path_of(target: bytes) -> bytes:
    """The origin-form (path and query) of an absolute-form request target."""
    if target.startswith(b"/"):
        return target
    rest = target.split(b"://", 1)[-1]
    slash = rest.find(b"/")
    return b"/" if slash < 0 else rest[slash:]


async def _closing_reply(up_reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
    """Relay the product's response head with ``Connection: close`` (the body follows);
    False, and a 502 written, when the product sent none."""
    try:
        head = await up_reader.readuntil(b"\r\n\r\n")
    except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
        writer.write(_refusal("502 Bad Gateway", "the product sent no response head"))
        return False
    status = head.split(b"\r\n", 1)[0]
    writer.write(_closing(head[:-4], status))
    return True


__all__ = ["BROWSER_FLAGS", "Gate"]
