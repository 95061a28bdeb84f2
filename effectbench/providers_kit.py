"""The served-provider skeleton: what a provider that runs a product repeats around it.

MockMed (and its PostgreSQL and diff variants), Roundup and the scaffold's template all
run a product for the harness, and did the same three things around their own code:

- ``start``: a fresh run directory (``effectbench.core.statedir.RunRoot``), what the
  product builds there once per run (a template database, a pristine tracker) and, for a
  product served from the harness's process, its ASGI app on a loopback socket
  (``effectbench.serve.LocalServer``); a failure on the way deletes the directory.
- ``provision``: an unguessable token per episode, the episode's URL on the shared
  server (``/e/<token>/``), and the episode registered as live.
- ``stop``: every live episode torn down, then what the episodes shared (pooled HTTP
  connections), then the server, then the run directory.

``ServedRun`` is that skeleton, ``LiveEpisodes`` the registry of episodes not yet torn
down (so ``stop`` can end them), ``Released`` an episode whose teardown is one function.
docs/writing-a-provider.md ("The served-provider skeleton") shows it in use.
"""

from __future__ import annotations

import secrets
import shutil
from collections.abc import Awaitable, Callable, Hashable
from pathlib import Path
from typing import Any, Final, Generic, Protocol, TypeAlias, TypeVar

import anyio

from effectbench.core.statedir import RunRoot
from effectbench.serve import LocalServer

__all__ = [
    "TOKEN_BYTES",
    "Episodic",
    "LiveEpisodes",
    "Released",
    "ServedRun",
    "Teardown",
    "episode_token",
]

TOKEN_BYTES: Final = 18
"""Random bytes of an episode's URL token (144 bits: no arm guesses another's)."""

Teardown: TypeAlias = Callable[[], Awaitable[None]]


class Episodic(Protocol):
    """A live episode: something whose teardown ends it (idempotent)."""

    async def teardown(self) -> None: ...


E = TypeVar("E", bound=Episodic)


def episode_token() -> str:
    """A fresh, unguessable token naming one episode on a shared server."""
    return secrets.token_urlsafe(TOKEN_BYTES)


class Released:
    """An episode whose teardown is one coroutine function: run once, shielded from
    cancellation (a teardown cut short would leave its files behind)."""

    def __init__(self, release: Teardown) -> None:
        self._release = release
        self._done = False

    async def teardown(self) -> None:
        if self._done:
            return
        self._done = True
        with anyio.CancelScope(shield=True):
            await self._release()


class LiveEpisodes(Generic[E]):
    """A provider's episodes not yet torn down, so ``stop`` can end them."""

    def __init__(self) -> None:
        self._by_key: dict[Hashable, E] = {}

    def add(self, key: Hashable, episode: E) -> Teardown:
        """Register ``episode``; returns its teardown (which unregisters it first)."""
        self._by_key[key] = episode

        async def teardown() -> None:
            self._by_key.pop(key, None)
            await episode.teardown()

        return teardown

    def values(self) -> list[E]:
        return list(self._by_key.values())

    async def teardown_all(self) -> None:
        """Every episode still live, in the order they were provisioned."""
        live, self._by_key = list(self._by_key.values()), {}
        for episode in live:
            await episode.teardown()


class ServedRun(Generic[E]):
    """One start of a provider: its run directory (None for one that keeps nothing on
    disk), its product server (None for one that serves nothing from this process, such
    as Roundup's per-episode trackers) and its live episodes."""

    def __init__(self, root: Path | None, server: LocalServer | None) -> None:
        self.root = root
        self.server = server
        self.live: LiveEpisodes[E] = LiveEpisodes()

    @classmethod
    async def start(
        cls,
        files: RunRoot | None,
        *,
        prepare: Callable[[Path], Awaitable[None]] | None = None,
        app: Any = None,
        label: str = "HTTP server",
    ) -> ServedRun[E]:
        """Make the run directory, ``prepare(root)`` in it, then serve ``app`` (when
        given) on 127.0.0.1; on any failure the directory is deleted and the error raised."""
        root = files.make() if files is not None else None
        try:
            if prepare is not None:
                assert root is not None, "prepare needs a run directory (files)"
                await prepare(root)
            server = None
            if app is not None:
                server = LocalServer(app, label=label)
                await server.start()
        except BaseException:
            if root is not None:
                shutil.rmtree(root, ignore_errors=True)
            raise
        return cls(root, server)

    @property
    def base_url(self) -> str:
        """The product server's root URL, ``http://127.0.0.1:<port>/``."""
        if self.server is None:
            raise RuntimeError("this run serves no product from the harness's process")
        return self.server.base_url

    def episode_url(self, token: str) -> str:
        """The URL of the episode named by ``token`` on the shared server."""
        return f"{self.base_url}e/{token}/"

    async def stop(self, *, before_server: Teardown | None = None) -> None:
        """Tear down every live episode, then ``before_server`` (shielded: what the
        episodes shared), then stop the server and delete the run directory, whatever
        fails first."""
        try:
            await self.live.teardown_all()
            if before_server is not None:
                with anyio.CancelScope(shield=True):
                    await before_server()
        finally:
            if self.server is not None:
                await self.server.stop()
            if self.root is not None:
                shutil.rmtree(self.root, ignore_errors=True)
