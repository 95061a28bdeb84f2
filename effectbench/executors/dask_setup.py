"""The run's setup reaches the Dask workers as a worker plugin, not as scattered data.

Dask gives a registered plugin to every worker of the cluster, and again to a worker
that joins or that its nanny restarts after it died, so a lost worker never takes the
setup with it. Scattered data (``client.scatter(..., broadcast=True)``) gave no such
promise: Dask's active memory manager drops the extra replicas (dask/dask#11148), and
when the one worker left holding the setup was killed, every episode task waiting for it
was cancelled ("lost dependencies") and the harness stopped with an internal error.
Only the dask executor imports this module (it imports distributed).
"""

from __future__ import annotations

from typing import Any

from distributed.diagnostics.plugin import WorkerPlugin

SETUPS: dict[str, Any] = {}
"""Per worker process: the setup of each run whose plugin is installed, by run id."""


def plugin_name(run_id: str) -> str:
    return f"effectbench-setup-{run_id}"


class SetupPlugin(WorkerPlugin):
    """Puts one run's setup into SETUPS on each worker; removed when unregistered."""

    def __init__(self, run_id: str, payload: Any) -> None:
        self.run_id = run_id
        self.payload = payload
        self.name = plugin_name(run_id)

    def setup(self, worker: Any) -> None:
        del worker
        SETUPS[self.run_id] = self.payload

    def teardown(self, worker: Any) -> None:
        del worker
        SETUPS.pop(self.run_id, None)
