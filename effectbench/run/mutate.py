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


@contextlib.asynccontextmanager
async def _twin(provider: BenchmarkProvider, spec: EpisodeSpec, options: RunOptions) -> Any:
    try:
        with anyio.fail_after(options.provider_timeout):
            twin = await provider.provision(spec.task, spec.trial, spec.params)
    except Exception as exc:  # noqa: BLE001 - provider code
        raise _NoTwin(f"twin provision failed: {_one_line(exc)}") from None
    try:
        yield twin
    finally:
        with anyio.CancelScope(
            shield=True, deadline=anyio.current_time() + options.teardown_timeout
        ):
            with contextlib.suppress(Exception):  # the reads are logged; a leak is the provider's
                await twin.teardown()


async def _reference(
    arm: Arm, spec: EpisodeSpec, twin: ProvisionedEpisode, options: RunOptions
) -> None:
    view = TaskView.of(
        spec.task, spec.trial, episode_id=spec.episode_id, params=spec.params, effect=spec.effect
    )
    await program_report(arm, view, twin.env, options.episode_timeout)


@attrs.frozen
class _Base:
    """The base twin's store before and after the reference, and its oracle's first read."""

    store: RecordStore
    pre: mutations.StoreState
    post: mutations.StoreState
    oracle_pre: Snapshot


async def _base(
    twin: ProvisionedEpisode, spec: EpisodeSpec, arm: Arm, options: RunOptions
) -> _Base | str:
    """The store before and after the reference, on a twin; or why it cannot be had."""
    store = store_of(twin)
    if store is None:
        return (
            "the provider offers no write handle on its store (ProvisionedEpisode.store; "
            "docs/writing-a-provider.md), so its oracle cannot be mutation-tested"
        )
    oracle_pre = await read_within(twin.oracle, options.provider_timeout)
    try:
        pre = await mutations.read_state(store)
        await _reference(arm, spec, twin, options)
        post = await mutations.read_state(store)
    except Exception as exc:  # noqa: BLE001 - a store that cannot be read is not mutatable
        return f"the store could not be read through its write handle: {_one_line(exc)}"
    return _Base(store, pre, post, oracle_pre)


def _read(
    m: mutations.Mutation, detail: str, pre: Snapshot, post: Snapshot, episode_pre: Snapshot
) -> MutationRead:
    return MutationRead(
        -1,
        {**m.plain(), "name": m.name},
        "applied",
        detail,
        None if pre == episode_pre else converter.unstructure(pre),
        converter.unstructure(post),
    )


async def _in_place(
    twin: ProvisionedEpisode,
    base: _Base,
    saved: bytes,
    m: mutations.Mutation,
    options: RunOptions,
    episode_pre: Snapshot,
) -> tuple[MutationRead, bool]:
    """``m`` applied to the base twin, read, and undone: (the read, whether the store came
    back to what the reference left)."""
    store = base.store
    assert isinstance(store, RestorableStore)
    try:
        detail = await mutations.apply(store, base.pre, base.post, m)
    except Exception as exc:  # noqa: BLE001 - the store refused it: that state cannot exist
        read = MutationRead(-1, {**m.plain(), "name": m.name}, "refused", _one_line(exc))
    else:
        post = await read_within(twin.oracle, options.provider_timeout)
        read = _read(m, detail, base.oracle_pre, post, episode_pre)
    try:
        await store.restore(saved)
        back = await mutations.read_state(store) == base.post
    except Exception:  # noqa: BLE001 - a store that cannot restore goes to fresh twins
        back = False
    return read, back


async def _one(
    provider: BenchmarkProvider,
    spec: EpisodeSpec,
    arm: Arm,
    options: RunOptions,
    m: mutations.Mutation,
    episode_pre: Snapshot,
) -> MutationRead:
    limit = options.provider_timeout
    plain = {**m.plain(), "name": m.name}
    async with _twin(provider, spec, options) as twin:
        store = store_of(twin)
        assert store is not None  # the base twin had one
        pre = await read_within(twin.oracle, limit)
        try:
            before = await mutations.read_state(store)
            await _reference(arm, spec, twin, options)
            after = await mutations.read_state(store)
            detail = await mutations.apply(store, before, after, m)
        except Exception as exc:  # noqa: BLE001 - the store refused it: that state cannot exist
            return MutationRead(-1, plain, "refused", _one_line(exc))
        post = await read_within(twin.oracle, limit)
    return _read(m, detail, pre, post, episode_pre)


async def run_mutations(
    provider: BenchmarkProvider,
    spec: EpisodeSpec,
    arm: Arm,
    options: RunOptions,
    emit: Emit,
    episode_pre: Snapshot,
) -> None:
    """Mutation-test the oracle of ``spec``'s task and log every read in its episode."""
    ep = spec.episode_id
    try:
        async with _twin(provider, spec, options) as twin:
            base = await _base(twin, spec, arm, options)
            if isinstance(base, str):
                event = MutationPlanned(False, base)
                await emit(event.TYPE, event_data(event), ep)
                return
            await _mutate(provider, spec, arm, options, emit, episode_pre, twin, base)
    except _NoTwin as exc:
        event = MutationPlanned(False, str(exc))
        await emit(event.TYPE, event_data(event), ep)


async def _mutate(
    provider: BenchmarkProvider,
    spec: EpisodeSpec,
    arm: Arm,
    options: RunOptions,
    emit: Emit,
    episode_pre: Snapshot,
    twin: ProvisionedEpisode,
    base: _Base,
) -> None:
    ep = spec.episode_id
    pre, post = base.pre, base.post
    every = mutations.plan(pre, post)
    # a mutation of a column or table the task declares irrelevant would be excused
    # whatever the oracle read: it is listed, not applied (a store's caches cost a twin each)
    irrelevant = spec.task.oracle.irrelevant
    planned = tuple(m for m in every if mutations.declared(irrelevant, m) is None)
    skipped = tuple(m.name for m in every if mutations.declared(irrelevant, m) is not None)
    written, removed = mutations.written_rows(pre, post)
    lines = tuple(
        [f"{t} row {r.locator!r} written" for t, rows in written.items() for r in rows]
        + [f"{t} row {r.locator!r} removed" for t, rows in removed.items() for r in rows]
    )
    reason = "" if every else "the store holds nothing to mutate"
    event = MutationPlanned(
        bool(every), reason, tuple({**m.plain(), "name": m.name} for m in planned), lines, skipped
    )
    await emit(event.TYPE, event_data(event), ep)
    saved: bytes | None = None
    if planned and isinstance(base.store, RestorableStore):
        with contextlib.suppress(Exception):  # a store that cannot save: fresh twins
            saved = await base.store.save()
    for i, m in enumerate(planned):
        if saved is not None:
            read, back = await _in_place(twin, base, saved, m, options, episode_pre)
            if not back:
                saved = None  # the store did not come back: the rest on fresh twins
        else:
            try:
                read = await _one(provider, spec, arm, options, m, episode_pre)
            except _NoTwin as exc:
                read = MutationRead(-1, {**m.plain(), "name": m.name}, "error", str(exc))
        read = MutationRead(i, read.mutation, read.status, read.detail, read.pre, read.snapshot)
        await emit(read.TYPE, event_data(read), ep)
