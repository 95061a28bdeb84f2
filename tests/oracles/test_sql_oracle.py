"""The generic all-tables SQLite oracle and the pure snapshot diff."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from effectbench.core.model import Effect, FieldEquals, ParamRef, RecordWritten, Row, Snapshot
from effectbench.core.provider import Oracle
from effectbench.oracles.sqlite import (
    SqliteAllTablesOracle,
    connect_ro,
    diff_snapshots,
    outside_effect,
    read_all_tables,
)


def make_db(path: Path) -> None:
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute(
        "CREATE TABLE encounters (id INTEGER PRIMARY KEY, patient_id TEXT, type TEXT, note TEXT)"
    )
    conn.execute('CREATE TABLE "bill ""items""" (code TEXT, amount INTEGER, raw BLOB)')
    conn.execute("INSERT INTO encounters (patient_id, type, note) VALUES ('p1', 'Urgent', 'old')")
    conn.close()


def write(path: Path, sql: str, *args: object) -> None:
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("BEGIN IMMEDIATE")
    conn.execute(sql, args)
    conn.execute("COMMIT")
    conn.close()


def test_reads_every_table_discovered_from_the_schema(tmp_path: Path) -> None:
    db = tmp_path / "sor.db"
    make_db(db)
    write(db, 'INSERT INTO "bill ""items""" VALUES (?, ?, ?)', "X1", 7, b"\x01\xff")
    oracle = SqliteAllTablesOracle(db)
    assert isinstance(oracle, Oracle)
    snap = anyio.run(oracle.read)
    assert snap.readable
    assert sorted(snap.tables) == ['bill "items"', "encounters"]
    assert snap.rows('bill "items"') == ({"code": "X1", "amount": 7, "raw": "01ff"},)
    assert snap.rows("encounters") == (
        {"id": 1, "patient_id": "p1", "type": "Urgent", "note": "old"},
    )


def test_a_table_created_later_is_seen_without_configuration(tmp_path: Path) -> None:
    db = tmp_path / "sor.db"
    make_db(db)
    write(db, "CREATE TABLE billing (id INTEGER PRIMARY KEY, amount INTEGER)")
    write(db, "INSERT INTO billing (amount) VALUES (?)", 5)
    snap = read_all_tables(db)
    assert snap.rows("billing") == ({"id": 1, "amount": 5},)


def test_rows_come_back_in_rowid_order(tmp_path: Path) -> None:
    db = tmp_path / "sor.db"
    make_db(db)
    for note in ("b", "a", "c"):
        write(
            db, "INSERT INTO encounters (patient_id, type, note) VALUES ('p1', 'Triage', ?)", note
        )
    write(db, "UPDATE encounters SET note = 'z' WHERE note = 'a'")
    notes = [r["note"] for r in read_all_tables(db).rows("encounters")]
    assert notes == ["old", "b", "z", "c"]


def test_without_rowid_table_is_read_deterministically(tmp_path: Path) -> None:
    db = tmp_path / "sor.db"
    make_db(db)
    write(db, "CREATE TABLE kv (k TEXT PRIMARY KEY, v TEXT) WITHOUT ROWID")
    write(db, "INSERT INTO kv VALUES ('b', '2'), ('a', '1')")
    assert read_all_tables(db).rows("kv") == ({"k": "a", "v": "1"}, {"k": "b", "v": "2"})


def test_the_oracle_connection_cannot_write(tmp_path: Path) -> None:
    db = tmp_path / "sor.db"
    make_db(db)
    conn = connect_ro(db)
    try:
        with pytest.raises(sqlite3.OperationalError, match="readonly|read-only|query_only"):
            conn.execute("INSERT INTO encounters (patient_id, type, note) VALUES ('p9', 'x', 'y')")
        with pytest.raises(sqlite3.OperationalError):
            conn.execute("CREATE TABLE evil (x)")
    finally:
        conn.close()
    assert len(read_all_tables(db).rows("encounters")) == 1
    assert "evil" not in read_all_tables(db).tables


def test_the_ro_uri_alone_refuses_writes(tmp_path: Path) -> None:
    """mode=ro is the guard, not just the query_only pragma: drop the pragma and writes still
    fail."""
    db = tmp_path / "sor.db"
    make_db(db)
    conn = connect_ro(db)
    try:
        conn.execute("PRAGMA query_only = OFF")
        with pytest.raises(sqlite3.OperationalError, match="readonly"):
            conn.execute("DELETE FROM encounters")
    finally:
        conn.close()


def test_missing_store_is_unreadable_and_not_created(tmp_path: Path) -> None:
    db = tmp_path / "nope" / "sor.db"
    snap = anyio.run(SqliteAllTablesOracle(db).read)
    assert not snap.readable
    assert snap.error and "read-only" in snap.error
    assert not db.exists()


def test_not_a_database_is_unreadable_not_a_crash(tmp_path: Path) -> None:
    db = tmp_path / "sor.db"
    db.write_bytes(b"this is not sqlite" * 100)
    snap = read_all_tables(db)
    assert not snap.readable and snap.error


def test_reads_while_a_writer_holds_the_lock_see_the_last_commit(tmp_path: Path) -> None:
    db = tmp_path / "sor.db"
    make_db(db)
    writer = sqlite3.connect(db, isolation_level=None)
    writer.execute("BEGIN IMMEDIATE")
    writer.execute(
        "INSERT INTO encounters (patient_id, type, note) VALUES ('p1', 'Triage', 'pending')"
    )
    try:
        assert len(read_all_tables(db).rows("encounters")) == 1
    finally:
        writer.execute("COMMIT")
        writer.close()
    assert len(read_all_tables(db).rows("encounters")) == 2


# --- diff -------------------------------------------------------------------------------------

PRE = Snapshot(
    readable=True,
    tables={
        "encounters": (
            {"id": 1, "patient_id": "p1", "type": "Urgent", "note": "old"},
            {"id": 2, "patient_id": "p2", "type": "Triage", "note": "x"},
        ),
        "audit": ({"who": "a"},),
    },
)


def test_diff_reports_added_changed_removed_per_table() -> None:
    post = Snapshot(
        readable=True,
        tables={
            "encounters": (
                {"id": 2, "patient_id": "p2", "type": "Triage", "note": "edited"},
                {"id": 3, "patient_id": "p1", "type": "Triage", "note": "n"},
            ),
            "audit": ({"who": "a"},),
            "billing": ({"id": 1, "amount": 5},),
        },
    )
    d = diff_snapshots(PRE, post)
    assert set(d.tables) == {"encounters", "billing"}
    enc = d.tables["encounters"]
    assert enc.id_field == "id"
    assert enc.added == ({"id": 3, "patient_id": "p1", "type": "Triage", "note": "n"},)
    assert enc.removed == ({"id": 1, "patient_id": "p1", "type": "Urgent", "note": "old"},)
    assert [c.key for c in enc.changed] == [2]
    assert enc.changed[0].after["note"] == "edited"
    assert d.tables["billing"].added == ({"id": 1, "amount": 5},)
    assert len(d.describe()) == 4


def test_diff_without_an_id_compares_whole_rows() -> None:
    post = Snapshot(readable=True, tables={**PRE.tables, "audit": ({"who": "b"},)})
    td = diff_snapshots(PRE, post).tables["audit"]
    assert td.id_field is None
    assert td.added == ({"who": "b"},) and td.removed == ({"who": "a"},) and td.changed == ()


def test_diff_honours_an_explicit_id_field() -> None:
    pre = Snapshot(readable=True, tables={"t": ({"code": "a", "v": 1},)})
    post = Snapshot(readable=True, tables={"t": ({"code": "a", "v": 2},)})
    td = diff_snapshots(pre, post, id_fields={"t": "code"}).tables["t"]
    assert td.changed and td.changed[0].key == "a" and not td.added and not td.removed


def test_diff_refuses_an_unreadable_side() -> None:
    with pytest.raises(ValueError, match="post snapshot is unreadable"):
        diff_snapshots(PRE, Snapshot.unreadable("gone"))


def test_identical_reads_have_an_empty_diff(tmp_path: Path) -> None:
    db = tmp_path / "sor.db"
    make_db(db)
    assert diff_snapshots(read_all_tables(db), read_all_tables(db)).empty


rows = st.lists(
    st.fixed_dictionaries({"id": st.integers(0, 6), "v": st.sampled_from(["a", "b", None])}),
    max_size=6,
    unique_by=lambda r: r["id"],
)
anon_rows = st.lists(st.fixed_dictionaries({"v": st.sampled_from(["a", "b", 1])}), max_size=6)


@settings(max_examples=150, deadline=None)
@given(rows, rows, anon_rows, anon_rows)
def test_diff_accounts_for_every_row(
    pre_r: list[Row], post_r: list[Row], pre_a: list[Row], post_a: list[Row]
) -> None:
    pre = Snapshot(readable=True, tables={"t": tuple(pre_r), "u": tuple(pre_a)})
    post = Snapshot(readable=True, tables={"t": tuple(post_r), "u": tuple(post_a)})
    d = diff_snapshots(pre, post)
    for name, before, after in (("t", pre_r, post_r), ("u", pre_a, post_a)):
        td = d.tables.get(name)
        added, removed, changed = (
            (0, 0, 0) if td is None else (len(td.added), len(td.removed), len(td.changed))
        )
        assert len(after) - len(before) == added - removed
        if sorted(repr(sorted(r.items())) for r in before) == sorted(
            repr(sorted(r.items())) for r in after
        ):
            assert td is None  # row order alone is not a change
        else:
            assert added + removed + changed > 0
    assert diff_snapshots(post, post).empty


# --- outside the declared effect --------------------------------------------------------------

EFFECT = Effect(
    record_written=RecordWritten(
        table="encounters", selector={"patient_id": "p1", "type": "Triage"}
    ),
    field_equals=(FieldEquals("note", "n"),),
)


def test_outside_effect_names_a_stray_write_to_another_table() -> None:
    pre = Snapshot(readable=True, tables={"encounters": (), "billing": ()})
    post = Snapshot(
        readable=True,
        tables={
            "encounters": ({"id": 1, "patient_id": "p1", "type": "Triage", "note": "n"},),
            "billing": ({"id": 1, "amount": 5},),
        },
    )
    stray = outside_effect(diff_snapshots(pre, post), EFFECT)
    assert stray == ['billing: row added {"amount":5,"id":1}']


def test_outside_effect_is_empty_for_the_declared_write_alone() -> None:
    post = Snapshot(
        readable=True,
        tables={
            **PRE.tables,
            "encounters": (
                *PRE.rows("encounters"),
                {"id": 3, "patient_id": "p1", "type": "Triage"},
            ),
        },
    )
    assert outside_effect(diff_snapshots(PRE, post), EFFECT) == []


def test_outside_effect_covers_wrong_target_collateral_loss_and_edits_out_of_the_selection() -> (
    None
):
    post = Snapshot(
        readable=True,
        tables={
            "encounters": (
                {"id": 2, "patient_id": "p2", "type": "Triage", "note": "x"},
                {"id": 3, "patient_id": "p2", "type": "Triage", "note": "n"},
            ),
            "audit": ({"who": "a"},),
        },
    )
    stray = outside_effect(diff_snapshots(PRE, post), EFFECT)
    assert len(stray) == 2
    assert any("added outside the selector" in s and '"p2"' in s for s in stray)
    assert any("removed outside the selector" in s and "Urgent" in s for s in stray)


def test_outside_effect_needs_a_resolved_effect() -> None:
    unresolved = Effect(
        record_written=RecordWritten(table="encounters", selector={"patient_id": "p1"}),
        field_equals=(FieldEquals("note", ParamRef("note")),),
    )
    with pytest.raises(ValueError, match="resolve"):
        outside_effect(diff_snapshots(PRE, PRE), unresolved)
