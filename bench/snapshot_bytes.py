"""Log bytes per Roundup episode with the generic all-tables oracle: full rows, then scoped.

What a provider author gets who points the generic SQLite oracle at a real product (as
issue 29's outside team did on theirs): every table of the tracker's database read per
snapshot, beside Roundup's own issue/msg oracle. Run twice on the same episodes: with
every table in full (the oracle before issue 29), then with
``SnapshotScope.of(task.expected_effect)`` (the effect names ``issue`` and ``msg``, so
every raw table is a digest per row). The raw tables are allow-listed (``<table>.*``) in
the tasks' diffs, so both runs judge exactly as stock Roundup does, and the bench checks
that their results are the same. ``--stock-users N`` first adds N accounts to the
pristine tracker: stock content no task touches, like a real help desk's directory.

    .venv/bin/python bench/snapshot_bytes.py [--stock-users 0] [--task GLOB] [--json PATH]
"""

from __future__ import annotations

import fnmatch
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import anyio
import attrs
import orjson
from _common import load_line, loadavg, parser, table, write_json
from effectbench_roundup import RoundupProvider
from effectbench_roundup.oracle import read_tracker

from effectbench.api import evaluate_provider_async
from effectbench.arms.baselines import ScreenOnlyArm
from effectbench.model import DiffEffect, Snapshot, TaskSpec
from effectbench.oracles.digest import SnapshotScope
from effectbench.oracles.sqlite import read_all_tables

_USERS = """
import sys
from roundup import instance
db = instance.open(sys.argv[1]).open("admin")
for i in range(int(sys.argv[2])):
    db.user.create(username=f"stock{i:05}", address=f"stock{i:05}@localhost",
                   realname=f"Stock User {i}", roles="User", organisation="Help desk floor 3")
db.commit()
db.close()
"""
SNAPSHOT_EVENTS = (b'"episode.pre_snapshot"', b'"episode.post_read"')


class _AllTables:
    """Roundup's issue/msg rows plus every raw table of the tracker's database."""

    def __init__(self, home: Path, scope: SnapshotScope | None) -> None:
        self._home, self._scope = home, scope

    async def read(self) -> Snapshot:
        def both() -> Snapshot:
            views = read_tracker(self._home)
            raw = read_all_tables(self._home / "db" / "db", scope=self._scope)
            if not (views.readable and raw.readable):
                return views if not views.readable else raw
            return Snapshot(readable=True, tables={**raw.tables, **views.tables})

        return await anyio.to_thread.run_sync(both)


class AllTablesRoundup(RoundupProvider):
    """Stock Roundup with the generic oracle beside its own; ``scoped``: with a scope."""

    def __init__(self, root: Path, *, scoped: bool, stock_users: int) -> None:
        super().__init__(tmp_root=root)
        self._scoped, self._stock = scoped, stock_users
        self._raw: tuple[str, ...] = ()

    async def start(self) -> None:
        await super().start()
        assert self.pristine is not None
        if self._stock:
            args = [sys.executable, "-c", _USERS, str(self.pristine), str(self._stock)]
            await anyio.run_process(args)
        self._raw = tuple(read_all_tables(self.pristine / "db" / "db").tables)

    def tasks(self) -> list[TaskSpec]:
        allow = tuple(f"{t}.*" for t in self._raw)
        return [
            attrs.evolve(
                t,
                expected_effect=attrs.evolve(t.expected_effect, allow=allow),
                oracle=attrs.evolve(t.oracle, tables=(*t.oracle.tables, *self._raw)),
            )
            for t in super().tasks()
            if isinstance(t.expected_effect, DiffEffect)
        ]

    async def provision(self, task: TaskSpec, trial: int, params: Mapping[str, str]) -> Any:
        episode = await super().provision(task, trial, params)
        home = Path(episode.oracle._home)  # the episode's tracker copy
        scope = SnapshotScope.of(task.expected_effect) if self._scoped else None
        return attrs.evolve(episode, oracle=_AllTables(home, scope))


def run_once(scoped: bool, stock: int, pattern: str) -> dict[str, Any]:
    async def main() -> dict[str, Any]:
        with tempfile.TemporaryDirectory() as tmp:
            provider = AllTablesRoundup(Path(tmp), scoped=scoped, stock_users=stock)
            await provider.start()  # the raw table names come from the pristine tracker
            chosen = [
                t.task_id for t in provider.tasks() if fnmatch.fnmatchcase(t.task_id, pattern)
            ]
            await provider.stop()
            provider = AllTablesRoundup(Path(tmp), scoped=scoped, stock_users=stock)
            result = await evaluate_provider_async(
                [ScreenOnlyArm()], provider, trials=1, task_globs=chosen, out=Path(tmp) / "run"
            )
            log = result.log_path.read_bytes()
            rows = (result.run_dir / "results.jsonl").read_bytes().splitlines()
            outcomes = sorted(
                (r["episode_id"], r["true_state"], r["outcome"]) for r in map(orjson.loads, rows)
            )
            snaps = sum(
                len(x) + 1 for x in log.splitlines() if any(s in x for s in SNAPSHOT_EVENTS)
            )
            return {
                "log": len(log),
                "snapshots": snaps,
                "episodes": len(rows),
                "outcomes": outcomes,
            }

    return anyio.run(main)


def main() -> None:
    ap = parser(__doc__)
    ap.add_argument("--stock-users", type=int, default=0, help="accounts added to the pristine")
    ap.add_argument("--task", default="roundup::nocsrf::*::ok", help="task id glob")
    args = ap.parse_args()
    before = loadavg()
    full = run_once(False, args.stock_users, args.task)
    scoped = run_once(True, args.stock_users, args.task)
    if full["outcomes"] != scoped["outcomes"]:
        raise SystemExit(f"the outcomes differ: {full['outcomes']} vs {scoped['outcomes']}")
    n = full["episodes"]
    print(load_line())
    print(
        table(
            ["oracle", "episodes", "log bytes / episode", "snapshot bytes / episode"],
            [
                [k, n, round(r["log"] / n), round(r["snapshots"] / n)]
                for k, r in (("every table in full", full), ("scoped (digest per row)", scoped))
            ],
        )
    )
    print(f"outcomes identical: {n} episodes; stock users added: {args.stock_users}")
    payload = {"stock_users": args.stock_users, "full": full, "scoped": scoped}
    write_json(args.json, "snapshot_bytes", payload, before)


if __name__ == "__main__":
    main()
