"""The MockMed anchor with its faults injected by the fault proxy (``--provider mockmed-proxy``).

The product runs with its built-in faults switched off (``ok``; ``keys`` for the
idempotent control, where honouring idempotency keys is the product's own behaviour,
not a fault) and a ``FaultProxy`` in front of each episode applies the anchor's fault
at the HTTP layer instead. Same goals, effects, oracle and categories as the anchor,
so the baselines' outcome counts must equal the anchor's (tests/mockmed/test_proxy_mockmed.py).

One built-in fault has no HTTP expression and stays built in: ``stale`` deletes the
patient's *other* rows (the concurrent actor's ward-B encounter) while storing the new
one. The proxy can only change, repeat, withhold or answer requests the arm sends, and
MockMed's HTTP surface has no way to delete a row; a replayed stale form would add a
row, not wipe one. So that task keeps fixture mode ``stale`` and no proxy plan.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Final

import attrs

from effectbench.faults import FaultProxy, ProxyPlan
from effectbench.model import JSONScalar, TaskSpec
from effectbench.provider import ActionRecord
from effectbench_mockmed.faults import FAULTS, Fault, StoreFault
from effectbench_mockmed.provider import Front, MockMedProvider, PackDef
from effectbench_mockmed.tasks import PREFIX, TASKS

__all__ = ["PROXY_FIXTURES", "PROXY_PACK", "PROXY_TASKS", "MockMedProxyProvider"]

_SUBMIT: Final = r"/e/[^/]+/encounters"


def _banner(saved: bool, message: str) -> str:
    cls = "saved" if saved else "error"
    return f"<!doctype html><body><div id='banner' class='{cls}'>{message}</div></body>"


def _plan(fault: str, **keys: JSONScalar) -> dict[str, JSONScalar]:
    return {
        "proxy.fault": fault,
        "proxy.path": _SUBMIT,
        **{f"proxy.{k}": v for k, v in keys.items()},
    }


PROXY_FIXTURES: Final[Mapping[str, Mapping[str, JSONScalar]]] = MappingProxyType(
    {
        "ok": {"mode": "ok"},
        "partial": {"mode": "ok", **_plan("partial", fields="note")},
        "duplicate": {"mode": "ok", **_plan("duplicate")},
        "timeout": {
            "mode": "ok",
            **_plan(
                "commit_then_error",
                status=504,
                body=_banner(False, "The server took too long to answer; try again"),
            ),
        },
        "optimistic": {"mode": "ok", **_plan("phantom", body=_banner(True, "Saved"))},
        "session": {
            "mode": "ok",
            **_plan(
                "phantom", status=401, body=_banner(False, "Your session expired; sign in again")
            ),
        },
        "stale": {"mode": "stale"},
        "double": {"mode": "ok", **_plan("double")},
        "idempotent": {"mode": "keys", **_plan("duplicate")},
    }
)
"""Anchor mode -> the proxied task's fixture (product mode plus the proxy plan)."""

PROXY_FAULTS: Final[Mapping[str, Fault]] = MappingProxyType(
    {
        "ok": FAULTS["ok"],
        "keys": Fault(1, StoreFault.NONE, True, True, 200, "Saved"),
        "stale": FAULTS["stale"],
    }
)


def _proxied(task: TaskSpec) -> TaskSpec:
    mode = task.task_id.removeprefix(PREFIX)
    return attrs.evolve(
        task,
        task_id=f"mockmed-proxy::{mode}",
        title=task.title.replace("MockMed", "MockMed via the fault proxy", 1),
        fixture=PROXY_FIXTURES[mode],
    )


PROXY_TASKS: Final[tuple[TaskSpec, ...]] = tuple(_proxied(t) for t in TASKS)
PROXY_PACK: Final = PackDef(tasks=PROXY_TASKS, faults=PROXY_FAULTS)


class MockMedProxyProvider(MockMedProvider):
    """The anchor, faults injected by a per-episode fault proxy instead of the product."""

    name: str = "mockmed-proxy"
    pack = PROXY_PACK

    async def _front(self, task: TaskSpec, server_url: str, episode_path: str) -> Front | None:
        secret = episode_path.strip("/")
        proxy = FaultProxy(
            server_url,
            ProxyPlan.from_fixture(task.fixture),
            label="MockMed fault proxy",
            redact=lambda path: path.replace(secret, "e/<token>"),
            base_path=episode_path,
        )
        await proxy.start()
        return _ProxyFront(proxy, proxy.base_url + episode_path)


class _ProxyFront:
    def __init__(self, proxy: FaultProxy, base_url: str) -> None:
        self._proxy = proxy
        self._base_url = base_url

    @property
    def base_url(self) -> str:
        return self._base_url

    async def stop(self) -> None:
        await self._proxy.stop()

    def injections(self) -> tuple[ActionRecord, ...]:
        return self._proxy.injections()
