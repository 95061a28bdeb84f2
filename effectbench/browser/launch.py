"""Find and launch a headless Chromium that dies with the harness.

Playwright's Python client starts its own Node driver, and the driver starts Chromium
in a process group of its own. Neither is ours to kill when the harness is SIGKILLed,
so the browser is launched through a tiny wrapper that sets ``PR_SET_PDEATHSIG``
(SIGKILL) before it execs the real executable: Chromium dies with the driver, and the
driver exits when its stdin (a pipe from this process) closes. A run that is killed
therefore leaves no browser behind (tests/browser/test_browser_lifecycle.py).

The browser comes from the distribution (Debian's ``chromium``), never from a
download at run time; ``playwright install chromium`` works too where that is the norm.
"""

from __future__ import annotations

import contextlib
import glob
import os
import shlex
import shutil
import sys
import tempfile
from collections.abc import AsyncIterator, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Final

from effectbench.browser.contain import BrowserSandbox, browser_sandbox
from effectbench.core.errors import ConfigurationError

if TYPE_CHECKING:
    from playwright.async_api import Browser, Playwright

CHROMIUM_ENV: Final = "EFFECTBENCH_CHROMIUM"
CANDIDATES: Final = (
    "chromium-headless-shell",
    "chromium",
    "chromium-browser",
    "google-chrome",
)
"""The headless shell first: Chromium's old headless mode without the browser's UI
layers costs a third of the full browser's CPU per episode (docs/performance.md, 8)."""
FLAGS: Final = (
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-extensions",
    "--disable-breakpad",
    "--disable-crash-reporter",
    "--mute-audio",
)
"""Headless, offline, no GPU, nothing that phones home or spawns a crash handler that
would outlive the browser. Chromium's own sandbox is off: the browser runs inside
bubblewrap as nobody instead (``effectbench.browser.contain``), where it has nothing to
shed, and as root where the host cannot contain (Chromium refuses its sandbox as root)."""

INSTALL_HINT: Final = (
    "install one with `apt-get install chromium-headless-shell` (Debian) or `apt-get "
    "install chromium` (Debian/Ubuntu) or `playwright install "
    f"chromium`, or point {CHROMIUM_ENV} at a Chromium executable"
)

_PDEATHSIG: Final = (
    "import ctypes,os,sys\n"
    "ctypes.CDLL(None).prctl(1, 9)\n"  # PR_SET_PDEATHSIG, SIGKILL
    "if os.getppid() != int(sys.argv[1]): os._exit(1)\n"  # the parent died before prctl
    "if sys.argv[2] == 'setsid': os.setsid()\n"
    "os.execv(sys.argv[3], sys.argv[3:])\n"
)
NODE_ENV: Final = "PLAYWRIGHT_NODEJS_PATH"


class BrowserUnavailable(ConfigurationError):
    """No usable browser (or no Playwright); the message says how to install one."""


def _managed_chromium() -> str | None:
    """A browser ``playwright install chromium`` put in its cache, if any."""
    root = os.environ.get("PLAYWRIGHT_BROWSERS_PATH") or str(
        Path.home() / ".cache" / "ms-playwright"
    )
    for pattern in (
        "chromium-*/chrome-linux*/chrome",
        "chromium_headless_shell-*/*/headless_shell",
    ):
        found = sorted(glob.glob(os.path.join(root, pattern)))
        if found:
            return found[-1]
    return None


def find_chromium() -> str:
    """The Chromium to launch: ``$EFFECTBENCH_CHROMIUM``, else the first of
    chromium-headless-shell, chromium, chromium-browser, google-chrome on PATH, else
    Playwright's own download."""
    configured = os.environ.get(CHROMIUM_ENV)
    if configured:
        path = shutil.which(configured)
        if path is None:
            raise BrowserUnavailable(
                f"{CHROMIUM_ENV}={configured} is not an executable; {INSTALL_HINT}"
            )
        return path
    for name in CANDIDATES:
        path = shutil.which(name)
        if path is not None:
            return path
    managed = _managed_chromium()
    if managed is not None:
        return managed
    raise BrowserUnavailable(
        f"no Chromium found (looked for {', '.join(CANDIDATES)}); {INSTALL_HINT}"
    )


def require_playwright() -> None:
    """Fail with one line when the Python package is missing."""
    try:
        import playwright.async_api  # noqa: F401
    except ImportError:
        raise BrowserUnavailable(
            "the browser substrate needs Playwright for Python: pip install 'effectbench[browser]'"
        ) from None


def check_browser() -> str:
    """Everything a browser run needs, checked before a run starts; the executable."""
    require_playwright()
    return find_chromium()


def _wrapper(directory: Path, executable: str, *, own_session: bool = False) -> str:
    """A launcher that gives the real executable PR_SET_PDEATHSIG (Linux only) and,
    with ``own_session``, a session of its own (no terminal signals reach it)."""
    script = directory / f"{Path(executable).name}-pdeathsig"
    python = shlex.quote(sys.executable)
    mode = "setsid" if own_session else "keep"
    script.write_text(
        "#!/bin/sh\n"
        f'exec {python} -I -S -c {shlex.quote(_PDEATHSIG)} "$PPID" {mode} '
        f'{shlex.quote(executable)} "$@"\n'
    )
    script.chmod(0o700)
    return str(script)


def _bundled_node() -> str | None:
    try:
        from playwright._impl._driver import compute_driver_executable
    except ImportError:
        return None
    saved = os.environ.pop(NODE_ENV, None)
    try:
        return str(compute_driver_executable()[0])
    except Exception:  # noqa: BLE001 - no bundled node: leave Playwright's own choice
        return None
    finally:
        if saved is not None:
            os.environ[NODE_ENV] = saved


async def start_playwright(tmp_dir: Path | None = None) -> Playwright:
    """Start Playwright's driver (async API) so that it dies with this process and a
    terminal's Ctrl-C reaches only the harness, which then stops the browsers itself:
    left in the harness's process group, the driver would die at once and fail every
    in-flight episode instead of letting the run stop cleanly.

    ``tmp_dir`` (the run's state root, effectbench.run.statedir) is the driver's temp dir:
    the browsers' profiles go there, so a killed run leaves none in $TMPDIR."""
    require_playwright()
    from playwright.async_api import async_playwright

    node = _bundled_node() if sys.platform.startswith("linux") else None
    with contextlib.ExitStack() as stack:
        wanted: dict[str, str] = {}
        if tmp_dir is not None:
            tmp_dir.mkdir(parents=True, exist_ok=True)
            wanted["TMPDIR"] = str(tmp_dir)
        if node is not None:
            tmp = stack.enter_context(
                tempfile.TemporaryDirectory(prefix="effectbench-driver-", dir=tmp_dir)
            )
            wanted[NODE_ENV] = _wrapper(Path(tmp), node, own_session=True)
        # Playwright reads the environment once, when it spawns the driver inside start().
        stack.enter_context(_environment(wanted))
        return await async_playwright().start()
    raise AssertionError("unreachable")  # pragma: no cover - mypy: the with block returns


@contextlib.contextmanager
def _environment(wanted: dict[str, str]) -> Iterator[None]:
    """``wanted`` set in this process's environment for the block, then put back."""
    saved = {k: os.environ.get(k) for k in wanted}
    os.environ.update(wanted)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


async def launch_chromium(
    playwright: Playwright,
    *,
    executable: str | None = None,
    args: Sequence[str] = (),
    timeout_s: float = 30.0,
    sandbox: BrowserSandbox | None = None,
) -> Browser:
    """Launch one configured headless Chromium on ``playwright`` (async API).

    ``executable`` defaults to ``find_chromium()``; ``args`` are added to ``FLAGS``. On
    Linux the browser is started with PR_SET_PDEATHSIG, so it never outlives its driver,
    and inside ``sandbox`` (default: ``browser_sandbox()``, contained where the host can
    contain agents; docs/agent-protocol.md, "What a contained browser can reach").
    """
    exe = executable or find_chromium()
    linux = sys.platform.startswith("linux")
    box = (browser_sandbox() if linux else BrowserSandbox(None)) if sandbox is None else sandbox
    with tempfile.TemporaryDirectory(prefix="effectbench-chromium-") as tmp:
        if box.contained:
            path = box.launcher(Path(tmp), exe)
        else:
            path = _wrapper(Path(tmp), exe) if linux else exe
        try:
            # The wrapper only has to exist until the browser has exec'd past it.
            return await playwright.chromium.launch(
                executable_path=path,
                headless=True,
                args=[*FLAGS, *args],
                timeout=timeout_s * 1000.0,
                handle_sigint=False,
                handle_sigterm=False,
                handle_sighup=False,
            )
        except Exception as exc:  # noqa: BLE001 - any launch failure means no usable browser
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            raise BrowserUnavailable(f"Chromium at {exe} failed to start ({first[:300]})") from None


@contextlib.asynccontextmanager
async def chromium(
    *,
    executable: str | None = None,
    args: Sequence[str] = (),
    sandbox: BrowserSandbox | None = None,
) -> AsyncIterator[Browser]:
    """``async with chromium() as browser:`` a Playwright driver and one configured
    headless Chromium, both stopped on exit (for reports, tools and tests)."""
    pw = await start_playwright()
    try:
        browser = await launch_chromium(pw, executable=executable, args=args, sandbox=sandbox)
        try:
            yield browser
        finally:
            await browser.close()
    finally:
        await pw.stop()
