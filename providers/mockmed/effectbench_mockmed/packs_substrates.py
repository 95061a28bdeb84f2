"""The anchor on every substrate (``--provider mockmed-substrates``, issue 28).

The nine anchor tasks, once per substrate, against the same MockMed server and the same
faults; only what the arm sees of the product changes:

- ``web``: the product's pages (the anchor as it is: the form driver over HTTP).
- ``desktop``: MockMed's native GTK client (``desktop/gtk_client.py``) on a display of
  the episode's own, the arm's ``desktop`` channel (its accessibility tree) and a form
  driver that works that tree (``desktop/driver.py``).
- ``remote_display``: the same GTK client on a display served over VNC, the arm's
  ``vnc`` channel only (host, port, password: pixels in, pointer and keys out) and a
  form driver that works from the framebuffer alone (``remote/driver.py``: OCR and
  pixel colours, never the accessibility tree or HTTP).

The product's own readback (``effect_verified``'s) is the same JSON endpoint on every
substrate. Pinned figures are the anchor's on each substrate (``anchor.PINNED``).
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Final

import anyio
import attrs

from effectbench.displays import DisplayPool, DisplaysUnavailable
from effectbench.displays.camera import FramebufferCamera
from effectbench.displays.desktop import DesktopApp, exited, start_client
from effectbench.displays.vnc import VncEndpoint
from effectbench.model import Substrate, TaskSpec
from effectbench.provider import EnvHandle, ProductDriver, ProvisionedEpisode
from effectbench_mockmed.desktop.driver import DesktopFormDriver
from effectbench_mockmed.faults import FAULTS
from effectbench_mockmed.provider import MockMedProvider, PackDef
from effectbench_mockmed.remote.driver import RemoteFormDriver
from effectbench_mockmed.tasks import TASKS

__all__ = ["CLIENT", "FRONTS", "SUBSTRATES", "SUBSTRATE_TASKS", "MockMedSubstratesProvider"]

PREFIX: Final = "mockmed-substrates::"


class DesktopUnavailable(DisplaysUnavailable):
    """The host cannot run MockMed's desktop client; the message says what to install."""


SYSTEM_PYTHON: Final = "/usr/bin/python3"
"""Debian's interpreter, which has python3-gi and GTK (the harness's may not)."""
CLIENT: Final = Path(__file__).with_name("desktop") / "gtk_client.py"

SCREEN: Final = (1024, 720)
"""A display's size (effectbench.displays.pool.GEOMETRY)."""
SUBSTRATES: Final = (Substrate.WEB, Substrate.DESKTOP, Substrate.REMOTE_DISPLAY)
"""The substrates the pack carries the anchor on."""


def _on(task: TaskSpec, substrate: Substrate) -> TaskSpec:
    mode = str(task.fixture["mode"])
    return attrs.evolve(
        task,
        task_id=f"{PREFIX}{substrate.value}::{mode}",
        title=f"{task.title} on {substrate.value}",
        substrate=substrate,
    )


SUBSTRATE_TASKS: Final = tuple(_on(t, s) for s in SUBSTRATES for t in TASKS)
SUBSTRATES_PACK: Final = PackDef(tasks=SUBSTRATE_TASKS, faults=FAULTS)

Front = Callable[["MockMedSubstratesProvider", ProvisionedEpisode], Awaitable[ProvisionedEpisode]]


async def _web(
    provider: MockMedSubstratesProvider, episode: ProvisionedEpisode
) -> ProvisionedEpisode:
    return episode


async def _desktop(
    provider: MockMedSubstratesProvider, episode: ProvisionedEpisode
) -> ProvisionedEpisode:
    return await provider.on_desktop(episode)


async def _remote_display(
    provider: MockMedSubstratesProvider, episode: ProvisionedEpisode
) -> ProvisionedEpisode:
    return await provider.on_remote_display(episode)


FRONTS: Final[Mapping[Substrate, Front]] = {
    Substrate.WEB: _web,
    Substrate.DESKTOP: _desktop,
    Substrate.REMOTE_DISPLAY: _remote_display,
}
"""How each substrate puts the product before the arm."""


class MockMedSubstratesProvider(MockMedProvider):
    """The anchor's nine tasks on the web, the desktop and a remote display (27 tasks)."""

    name: str = "mockmed-substrates"
    pack = SUBSTRATES_PACK

    def __init__(self, *, tmp_root: Path | None = None) -> None:
        super().__init__(tmp_root=tmp_root)
        self._displays: dict[bool, DisplayPool] = {}
        """The run's displays, served over VNC (True) or not."""
        self._displays_lock = anyio.Lock()

    async def stop(self) -> None:
        try:
            await super().stop()
        finally:
            pools, self._displays = list(self._displays.values()), {}
            for displays in pools:
                await displays.stop()

    async def provision(
        self, task: TaskSpec, trial: int, params: Mapping[str, str]
    ) -> ProvisionedEpisode:
        front = FRONTS.get(task.substrate)
        if front is None:
            raise ValueError(f"task {task.task_id}: mockmed-substrates has no {task.substrate}")
        episode = await super().provision(task, trial, params)
        try:
            return await front(self, episode)
        except BaseException:
            with anyio.CancelScope(shield=True):
                await episode.teardown()
            raise

    async def _pool(self, *, vnc: bool = False) -> DisplayPool:
        """The run's displays (served over VNC or not), started with the first episode
        that needs one (a run of web tasks starts none), one more whenever every display
        is lent."""
        async with self._displays_lock:
            if vnc not in self._displays:
                await _check_gtk()
                # A remote display is pixels only: no accessibility bus or registry.
                pool = DisplayPool(displays=1, grow=True, vnc=vnc, accessibility=not vnc)
                await pool.start()
                self._displays[vnc] = pool
            return self._displays[vnc]

    async def on_desktop(self, episode: ProvisionedEpisode) -> ProvisionedEpisode:
        """The episode on a display of its own: MockMed's desktop client on it, the
        arm's channel its accessibility tree, the product's readback unchanged."""
        return await self._on_display(episode, vnc=False)

    async def on_remote_display(self, episode: ProvisionedEpisode) -> ProvisionedEpisode:
        """The episode on a display of its own served over VNC: MockMed's desktop client
        on it, the arm's only channel that display's VNC endpoint (no base URL, no
        accessibility tree), the product's readback unchanged."""
        return await self._on_display(episode, vnc=True)

    async def _on_display(self, episode: ProvisionedEpisode, *, vnc: bool) -> ProvisionedEpisode:
        pool = await self._pool(vnc=vnc)
        web = episode.env
        stack = contextlib.AsyncExitStack()
        try:
            display = await stack.enter_async_context(pool.episode())
            argv = [SYSTEM_PYTHON, "-I", "-S", str(CLIENT), web.channels["base_url"]]
            channels = {k: v for k, v in web.channels.items() if k != "base_url"}
            driver: ProductDriver
            if vnc:  # pixels only: the display has no accessibility bus to register on
                client = await start_client(pool, display, argv)
                door = VncEndpoint(display)
                stack.push_async_callback(door.aclose)
                endpoint = await door.start()
                channels.update(endpoint.channels())
                driver = RemoteFormDriver(endpoint, web.telemetry)
            else:
                app = await DesktopApp.launch(pool, display, argv)
                stack.push_async_callback(app.close)
                client = app.proc
                channels.update(app.channel().channels())
                driver = DesktopFormDriver(app, web.telemetry)
        except BaseException:
            with anyio.CancelScope(shield=True):
                await stack.aclose()
            raise
        camera = None
        if display.vnc is not None:  # the harness's own screenshots for protocol agents
            camera = FramebufferCamera(display.vnc, *SCREEN)
        env = EnvHandle(
            channels=channels,
            telemetry=web.telemetry,
            driver=driver,
            verifier=web.verifier,
            browser_camera=camera,
        )

        async def teardown() -> None:
            with anyio.CancelScope(shield=True):
                try:
                    await stack.aclose()
                finally:
                    await episode.teardown()

        gone = functools.partial(exited, client)
        return attrs.evolve(episode, env=env, teardown=_once(teardown), gone=gone)


async def _check_gtk() -> None:
    """A one-line error naming the packages when the system interpreter lacks GTK 3."""
    probe = [SYSTEM_PYTHON, "-I", "-c", "import gi; gi.require_version('Gtk', '3.0')"]
    try:
        result = await anyio.run_process(probe, check=False)
    except OSError:
        result = None
    if result is None or result.returncode != 0:
        raise DesktopUnavailable(
            f"the desktop tasks run MockMed's GTK client on {SYSTEM_PYTHON} with GTK 3: "
            "as root, apt-get install python3-gi gir1.2-gtk-3.0"
        )


def _once(teardown: Callable[[], Awaitable[None]]) -> Callable[[], Awaitable[None]]:
    done = False

    async def once() -> None:
        nonlocal done
        if not done:
            done = True
            await teardown()

    return once
