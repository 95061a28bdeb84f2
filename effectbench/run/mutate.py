"""The oracle mutation audit of one reference episode (docs/audit.md).

On a twin (``provision`` again: the same task and trial, its own store) the harness reads
the store through its write handle, runs the reference program, reads it again, and
plans every single mutation of what the reference left (``run.mutations``). On a store
that can restore a saved state (``RestorableStore``) each mutation is applied to that
twin, the oracle reads it, and the store is put back to what the reference left (checked
by reading it again; a store that does not come back sends the rest to fresh twins).
Otherwise each mutation gets a fresh twin: read by the oracle, the reference run, the
mutation applied through the write handle, the oracle read again. The reads go into the
reference's episode as ``episode.mutation_planned`` / ``episode.mutation_read``, so the
audit judges each mutated record from the log alone and ``verify`` judges it again.
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import anyio
import attrs

from effectbench.core.arm import Arm, TaskView
from effectbench.core.codec import converter
from effectbench.core.events import MutationPlanned, MutationRead, event_data
from effectbench.core.model import Snapshot, TaskSpec
from effectbench.core.provider import BenchmarkProvider, ProvisionedEpisode
from effectbench.core.store import RecordStore, RestorableStore
from effectbench.oracles.sqlite import SqliteAllTablesOracle
from effectbench.oracles.sqlite_store import SqliteStore
from effectbench.run import mutations
from effectbench.run.options import RunOptions
from effectbench.run.plan import EpisodeSpec
from effectbench.run.twin import program_report, read_within

__all__ = ["run_mutations", "store_of", "wants_mutations"]

Emit = Callable[[str, Mapping[str, Any], str | None], Awaitable[None]]


def wants_mutations(task: TaskSpec) -> bool:
    """Whether the audit mutation-tests this task: it has a correct record to mutate (a
    correct action) or is a refusal control (its untouched record). A fault task with no
    correct action leaves nothing correct behind; mutating a wrong record proves nothing."""
    return task.correct_action_available or task.oracle.refusal_controls


def store_of(provisioned: ProvisionedEpisode) -> RecordStore | None:
    """The episode's write handle: the provider's own, else the generic SQLite oracle's."""
    if provisioned.store is not None:
        return provisioned.store
    if isinstance(provisioned.oracle, SqliteAllTablesOracle):
        return SqliteStore(provisioned.oracle.db_path)
    return None


def _one_line(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {' '.join(str(exc).split())}"[:300]


class _NoTwin(Exception):
    pass


@attrs.frozen
class _Base:
    """The base twin's store before and after the reference, and its oracle's first read."""

    store: RecordStore
    pre: mutations.StoreState
    post: mutations.StoreState
    oracle_pre: Snapshot


def _not_read(m: mutations.Mutation, status: str, detail: str) -> MutationRead:
    return MutationRead(-1, m.plain(), status, detail)


@attrs.frozen
class _Audit:
    """The mutation audit of one reference episode: what every twin is made from."""

    provider: BenchmarkProvider
    spec: EpisodeSpec
    arm: Arm
    options: RunOptions
    episode_pre: Snapshot
    """The reference episode's own pre-snapshot (a twin's equal read is not logged again)."""

    @contextlib.asynccontextmanager
    async def twin(self) -> Any:
        spec, options = self.spec, self.options
        try:
            with anyio.fail_after(options.provider_timeout):
                twin = await self.provider.provision(spec.task, spec.trial, spec.params)
        except Exception as exc:  # noqa: BLE001 - provider code
            raise _NoTwin(f"twin provision failed: {_one_line(exc)}") from None
        try:
            yield twin
        finally:
            with anyio.CancelScope(
                shield=True, deadline=anyio.current_time() + options.teardown_timeout
            ):
                # the reads are logged; a leak is the provider's
                with contextlib.suppress(Exception):
                    await twin.teardown()

    async def oracle_read(self, twin: ProvisionedEpisode) -> Snapshot:
        return await read_within(twin.oracle, self.options.provider_timeout)

    async def reference(
        self, twin: ProvisionedEpisode, store: RecordStore
    ) -> tuple[mutations.StoreState, mutations.StoreState]:
        """The store before and after the reference program ran on ``twin``."""
        s = self.spec
        view = TaskView.of(
            s.task, s.trial, episode_id=s.episode_id, params=s.params, effect=s.effect
        )
        pre = await mutations.read_state(store)
        await program_report(self.arm, view, twin.env, self.options.episode_timeout)
        return pre, await mutations.read_state(store)

    async def base(self, twin: ProvisionedEpisode) -> _Base | str:
        """The store before and after the reference, on a twin; or why it cannot be had."""
        store = store_of(twin)
        if store is None:
            return (
                "the provider offers no write handle on its store (ProvisionedEpisode.store; "
                "docs/writing-a-provider.md), so its oracle cannot be mutation-tested"
            )
        oracle_pre = await self.oracle_read(twin)
        try:
            pre, post = await self.reference(twin, store)
        except Exception as exc:  # noqa: BLE001 - a store that cannot be read is not mutatable
            return f"the store could not be read through its write handle: {_one_line(exc)}"
        return _Base(store, pre, post, oracle_pre)

    def read(
        self, m: mutations.Mutation, detail: str, pre: Snapshot, post: Snapshot
    ) -> MutationRead:
        return MutationRead(
            -1,
            m.plain(),
            "applied",
            detail,
            None if pre == self.episode_pre else converter.unstructure(pre),
            converter.unstructure(post),
        )

    async def in_place(
        self, twin: ProvisionedEpisode, base: _Base, saved: bytes, m: mutations.Mutation
    ) -> tuple[MutationRead, bool]:
        """``m`` applied to the base twin, read, and undone: (the read, whether the store came
        back to what the reference left)."""
        store = base.store
        assert isinstance(store, RestorableStore)
        try:
            detail = await mutations.apply(store, base.pre, base.post, m)
        except Exception as exc:  # noqa: BLE001 - the store refused it: that state cannot exist
            read = _not_read(m, "refused", _one_line(exc))
        else:
            read = self.read(m, detail, base.oracle_pre, await self.oracle_read(twin))
        try:
            await store.restore(saved)
            back = await mutations.read_state(store) == base.post
        except Exception:  # noqa: BLE001 - a store that cannot restore goes to fresh twins
            back = False
        return read, back

    async def fresh(self, m: mutations.Mutation) -> MutationRead:
        """``m`` applied on a fresh twin, after the reference ran there."""
        async with self.twin() as twin:
            store = store_of(twin)
            assert store is not None  # the base twin had one
            pre = await self.oracle_read(twin)
            try:
                before, after = await self.reference(twin, store)
                detail = await mutations.apply(store, before, after, m)
            except Exception as exc:  # noqa: BLE001 - the store refused it: that state cannot exist
                return _not_read(m, "refused", _one_line(exc))
            post = await self.oracle_read(twin)
        return self.read(m, detail, pre, post)

    async def mutate(self, emit: Emit, twin: ProvisionedEpisode, base: _Base) -> None:
        ep = self.spec.episode_id
        pre, post = base.pre, base.post
        every = mutations.plan(pre, post)
        # a mutation of a column or table the task declares irrelevant would be excused
        # whatever the oracle read: it is listed, not applied (a store's caches cost a twin each)
        irrelevant = self.spec.task.oracle.irrelevant
        planned = tuple(m for m in every if mutations.declared(irrelevant, m) is None)
        skipped = tuple(m.name for m in every if mutations.declared(irrelevant, m) is not None)
        written, removed = mutations.written_rows(pre, post)
        lines = tuple(
            [f"{t} row {r.locator!r} written" for t, rows in written.items() for r in rows]
            + [f"{t} row {r.locator!r} removed" for t, rows in removed.items() for r in rows]
        )
        reason = "" if every else "the store holds nothing to mutate"
        event = MutationPlanned(
            bool(every), reason, tuple(m.plain() for m in planned), lines, skipped
        )
        await emit(event.TYPE, event_data(event), ep)
        saved: bytes | None = None
        if planned and isinstance(base.store, RestorableStore):
            with contextlib.suppress(Exception):  # a store that cannot save: fresh twins
                saved = await base.store.save()
        for i, m in enumerate(planned):
            if saved is not None:
                read, back = await self.in_place(twin, base, saved, m)
                if not back:
                    saved = None  # the store did not come back: the rest on fresh twins
            else:
                try:
                    read = await self.fresh(m)
                except _NoTwin as exc:
                    read = _not_read(m, "error", str(exc))
            read = attrs.evolve(read, index=i)
            await emit(read.TYPE, event_data(read), ep)


async def run_mutations(
    provider: BenchmarkProvider,
    spec: EpisodeSpec,
    arm: Arm,
    options: RunOptions,
    emit: Emit,
    episode_pre: Snapshot,
) -> None:
    """Mutation-test the oracle of ``spec``'s task and log every read in its episode."""
    job = _Audit(provider, spec, arm, options, episode_pre)
    try:
        async with job.twin() as twin:
            base = await job.base(twin)
            if not isinstance(base, str):
                await job.mutate(emit, twin, base)
                return
            event = MutationPlanned(False, base)
    except _NoTwin as exc:
        event = MutationPlanned(False, str(exc))
    await emit(event.TYPE, event_data(event), spec.episode_id)
