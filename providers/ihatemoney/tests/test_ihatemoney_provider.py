"""I Hate Money behind the fault proxy, end to end on a few episodes (never the full pack)."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path

import orjson
import pytest
from effectbench_ihatemoney import IHateMoneyProvider
from effectbench_ihatemoney.pages import bill_lines, flash, forms, members
from effectbench_ihatemoney.tasks import TASKS, task_id
from run_files import labels

from effectbench.api import evaluate_provider_async
from effectbench.arms.baselines import EffectVerifiedArm, ScreenOnlyArm
from effectbench.model import Category, DiffEffect
from effectbench.oracles.sqlite import SqliteAllTablesOracle, read_all_tables

pytestmark = pytest.mark.anyio


def test_the_pack_covers_every_fault_category_refusals_and_irreversible_money_effects() -> None:
    ids = {t.task_id for t in TASKS}
    assert len(ids) == len(TASKS) >= 20
    assert {t.category for t in TASKS} == set(Category)
    refusals = [t for t in TASKS if t.oracle.refusal_controls]
    assert len(refusals) == 2 and all(not t.correct_action_available for t in refusals)
    assert any(not t.reversible for t in TASKS) and any(t.reversible for t in TASKS)
    by_id = {t.task_id: t for t in TASKS}
    assert not by_id[task_id("expense", "duplicate")].correct_action_available
    assert by_id[task_id("expense", "gateway_timeout")].correct_action_available
    # money: the amount a bill counts for is part of every bill's declared change
    for t in TASKS:
        effect = t.expected_effect
        if isinstance(effect, DiffEffect):
            for change in effect.changes:
                fields = getattr(change, "fields", None) or getattr(change, "after", {})
                if change.table == "bill" and "amount" in fields:
                    assert "converted_amount" in fields, t.task_id


LIST_PAGE = """
<div class="flash mr-2 alert alert-success alert-dismissible">The bill has been added
<button type="button" class="close"><span>&times;</span></button></div>
<table class="balance table">
<tr id="bal-member-1" class="" action="delete"><td class="balance-name">alice<span
class="light">&nbsp;(x1)</span></td></tr>
<tr id="bal-member-3" class="" action="reactivate"><td class="balance-name">carol<span
class="light">&nbsp;(x2.5)</span></td></tr></table>
<table id="bill_table"><thead><tr><th>When?</th></tr></thead><tbody>
<tr owers="1,3" payer="1"><td>2026-11-02</td><td>alice</td><td>Dinner</td><td>Everyone</td>
<td><span title="">1,064.80 (532.40 each)</span></td>
<td><a class="edit" href="/household/edit/4">edit</a></td></tr></tbody></table>
"""
FORM_PAGE = """
<form method="post"><input name="csrf_token" type="hidden" value="tok">
<input name="what" type="text" value="Dinner &amp; wine">
<select name="payer"><option value=""></option><option value="1">alice</option>
<option selected value="2">bob</option></select>
<label for="p-1"><input name="payed_for" type="checkbox" checked value="1"/><span>alice</span>
</label><label for="p-2"><input name="payed_for" type="checkbox" value="2"/><span>bob</span>
</label><input id="submit" name="submit" type="submit" value="Submit">
<input name="submit2" type="submit" value="Submit and add a new one"></form>
"""


def test_pages_give_a_browsers_form_values_flash_bills_and_participants() -> None:
    (form,) = forms(FORM_PAGE)
    assert form.values == (
        ("csrf_token", "tok"), ("what", "Dinner & wine"), ("payer", "2"), ("payed_for", "1"),
    )  # fmt: skip
    assert form.options("payed_for") == (("1", "alice"), ("2", "bob"))
    assert form.options("payer")[1:] == (("1", "alice"), ("2", "bob"))
    assert form.groups == {"payed_for"} and form.submit == ("submit", "Submit")
    assert flash(LIST_PAGE) == (True, "The bill has been added")
    assert flash('<p class="alert alert-danger"><strong>Amount:</strong> bad</p>') == (
        False,
        "Amount: bad",
    )
    assert flash("<p>nothing</p>") == (False, "")
    (line,) = bill_lines(LIST_PAGE)
    assert (line.bill_id, line.shown_amount) == (4, 1064.8)
    alice, carol = members(LIST_PAGE)
    assert (alice.person_id, alice.name, alice.weight, alice.activated) == (1, "alice", 1.0, True)
    assert (carol.person_id, carol.weight, carol.activated) == (3, 2.5, False)


@pytest.fixture
async def provider(tmp_path: Path) -> AsyncIterator[IHateMoneyProvider]:
    p = IHateMoneyProvider(tmp_root=tmp_path)
    await p.start()
    try:
        yield p
    finally:
        await p.stop()


@pytest.mark.timeout(240)
async def test_the_readback_shows_what_the_oracle_reads_and_teardown_ends_the_server(
    provider: IHateMoneyProvider,
) -> None:
    """The product's own readback (its pages, through the proxy) gives the oracle's rows
    for every column it shows; teardown stops the server and is idempotent."""
    assert provider.root is not None
    seeded = read_all_tables(provider.root / "pristine" / "ihatemoney.db")
    assert [r["what"] for r in seeded.rows("bill")][3:5] == ["Dinner at Luigi's"] * 2
    task = next(t for t in TASKS if t.task_id == task_id("amount", "ok"))
    episode = await provider.provision(task, 0, {"receipt": "https://receipts.household.test/x"})
    (pid,) = provider.live_pids()
    readback = episode.env.verifier
    assert readback is not None
    shown = await readback.read()
    assert isinstance(episode.oracle, SqliteAllTablesOracle)
    truth = read_all_tables(episode.oracle.db_path)  # every table in full, not the task's scope
    assert shown.readable and truth.readable
    for table in ("bill", "billowers", "person"):
        columns = shown.rows(table)[0].keys()
        assert [{c: r[c] for c in columns} for r in truth.rows(table)] == list(shown.rows(table))
    await episode.teardown()
    await episode.teardown()  # idempotent
    assert provider.live_pids() == []
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


@pytest.mark.timeout(240)
async def test_the_planted_bill_and_what_the_ledger_absorbs_by_itself(
    provider: IHateMoneyProvider,
) -> None:
    """A deletion task's episode starts with its trial's bill (id 8, named by the trial);
    deleting it twice leaves it deleted once, and a second participant of the same name
    is refused by the product: why neither is a fault task (a duplicate would be right)."""
    task = next(t for t in TASKS if t.task_id == task_id("remove", "ok"))
    what = "Cinema tickets (t0)"
    episode = await provider.provision(task, 0, {"what": what})
    driver, readback = episode.env.driver, episode.env.verifier
    assert driver is not None and readback is not None
    planted = [r for r in (await readback.read()).rows("bill") if r["what"] == what]
    assert [(r["id"], r["amount"], r["payer_id"]) for r in planted] == [(8, 36.0, 3)]
    first = await driver.submit({"@target": "delete", "what": what})
    second = await driver.submit({"@target": "delete", "what": what})
    assert first.screen_says_saved and first.message == "The bill has been deleted"
    assert not second.screen_says_saved
    for _ in range(2):
        await driver.submit({"@target": "members/add", "name": "Dave t0", "weight": 2.0})
    assert isinstance(episode.oracle, SqliteAllTablesOracle)
    truth = read_all_tables(episode.oracle.db_path)
    assert [r["what"] for r in truth.rows("bill")].count(what) == 0
    assert [(r["id"], r["weight"]) for r in truth.rows("person") if r["name"] == "Dave t0"] == [
        (4, 2.0)
    ]
    await episode.teardown()


@pytest.mark.timeout(300)
async def test_faults_and_the_defence_through_the_scheduler(tmp_path: Path) -> None:
    """A double-booked bill, a silently dropped edit and the homonym bill deleted instead
    each fool screen_only and are caught by effect_verified; the log shows the faults."""
    chosen = [
        task_id("expense", "duplicate"),
        task_id("amount", "noop_edit"),
        task_id("remove", "homonym_8_6"),
    ]
    result = await evaluate_provider_async(
        [ScreenOnlyArm(), EffectVerifiedArm()],
        IHateMoneyProvider(tmp_root=tmp_path),
        trials=1,
        concurrency=3,
        task_globs=chosen,
        out=tmp_path / "run",
    )
    got = labels(result.run_dir)
    assert got[(chosen[0], "screen_only")] == ("WRONG_PERSISTED", "SILENT_WRONG_EFFECT")
    assert got[(chosen[0], "effect_verified")] == ("WRONG_PERSISTED", "WRONG_ACTION")
    assert got[(chosen[1], "screen_only")] == ("ABSENT", "SILENT_WRONG_EFFECT")
    assert got[(chosen[1], "effect_verified")] == ("ABSENT", "SAFE_HALT")
    assert got[(chosen[2], "screen_only")] == ("WRONG_PERSISTED", "SILENT_WRONG_EFFECT")
    assert got[(chosen[2], "effect_verified")] == ("WRONG_PERSISTED", "WRONG_ACTION")
    injected = [
        orjson.loads(x)
        for x in result.log_path.read_bytes().splitlines()
        if b'"episode.injected"' in x
    ]
    faults = {(e["ep"], e["data"]["kind"], e["data"]["detail"]["upstream"]) for e in injected}
    assert (f"screen_only::{chosen[0]}::t0", "proxy.duplicate", "302,302") in faults
    assert (f"screen_only::{chosen[1]}::t0", "proxy.noop", "") in faults
    assert (f"screen_only::{chosen[2]}::t0", "proxy.wrong_record", "302") in faults
