"""Seed a fresh I Hate Money database with the household world (run as a script).

Run by ``ledger.build_pristine`` in a subprocess, with ``IHATEMONEY_SETTINGS_FILE_PATH``
naming the pristine ledger's settings: ``create_app`` runs the product's own database
migrations, then its own models write the world.

Project ``household`` with three participants: alice and bob (one share each) and
carol (two shares). Seven bills: the first three ordinary; bills 4 and 5 are homonyms
("Dinner at Luigi's", 60.00, a week apart, paid by alice and by bob); bills 6 and 7 are
two outings (cinema, concert). Bill ids start above the participants' (1-3) so a record
id never equals a participant id in a form. ``plant_bill`` adds one more bill to an
episode's copy before its server starts (the deletion task's, named per trial).
"""

from __future__ import annotations

import datetime
import sqlite3
import sys
from pathlib import Path
from typing import Final

PROJECT = "household"
PROJECT_PASSWORD = "household-pw"
MEMBERS = (("alice", 1.0), ("bob", 1.0), ("carol", 2.0))
BILLS = (
    # (what, payer index, amount, date, ower indexes)
    ("Rent share", 0, 900.0, "2026-11-01", (0, 1, 2)),
    ("Electricity", 1, 84.3, "2026-11-03", (0, 1, 2)),
    ("Groceries week 45", 2, 127.9, "2026-11-06", (0, 1, 2)),
    ("Dinner at Luigi's", 0, 60.0, "2026-11-02", (0, 1, 2)),
    ("Dinner at Luigi's", 1, 60.0, "2026-11-09", (0, 1, 2)),
    ("Cinema tickets", 2, 36.0, "2026-11-12", (0, 2)),
    ("Concert tickets", 2, 96.0, "2026-11-14", (0, 1, 2)),
)


PLANTED: Final = ("Cinema tickets", 2, 36.0, "2026-11-16", (0, 2))
"""The bill a deletion task's episode starts with (its name carries the trial's tag)."""


def plant_bill(db: Path, what: str) -> None:
    """Add the planted bill, named ``what``, to the ledger at ``db`` as the product would
    have written it (the next bill id, whom it is paid for), before its server starts."""
    _, payer, amount, day, owers = PLANTED
    with sqlite3.connect(db) as conn:
        people = [r[0] for r in conn.execute("SELECT id FROM person ORDER BY id")]
        cur = conn.execute(
            "INSERT INTO bill (payer_id, amount, date, what, creation_date, external_link, "
            "converted_amount, original_currency, bill_type) "
            "VALUES (?, ?, ?, ?, ?, '', ?, 'XXX', 'EXPENSE')",
            (people[payer], amount, day, what, day, amount),
        )
        conn.executemany(
            "INSERT INTO billowers (bill_id, person_id) VALUES (?, ?)",
            [(cur.lastrowid, people[i]) for i in owers],
        )
    conn.close()


def main() -> None:
    from ihatemoney.models import Bill, BillType, Person, Project, db
    from ihatemoney.run import create_app
    from werkzeug.security import generate_password_hash

    app = create_app()
    with app.app_context():
        project = Project(
            id=PROJECT,
            name="Household",
            password=generate_password_hash(PROJECT_PASSWORD),
            contact_email="household@localhost",
            default_currency="XXX",
        )
        db.session.add(project)
        db.session.commit()
        people = [Person(project_id=PROJECT, name=n, weight=w) for n, w in MEMBERS]
        db.session.add_all(people)
        db.session.commit()
        for what, payer, amount, day, owers in BILLS:
            db.session.add(
                Bill(
                    amount=amount,
                    date=datetime.date.fromisoformat(day),
                    what=what,
                    payer_id=people[payer].id,
                    owers=[people[i] for i in owers],
                    original_currency="XXX",
                    project_default_currency="XXX",
                    bill_type=BillType.EXPENSE,
                    external_link="",
                )
            )
            db.session.commit()  # one at a time: the ids follow the list


if __name__ == "__main__":
    main()
    sys.exit(0)
