"""Seed a freshly initialised tracker with the help-desk world (run as a script).

Users: ``helpdesk`` (the arm's account, role User) and ``alice`` (a colleague to
assign to, with an e-mail address, so every change that notifies her exercises the
mail path). Issues: issue1 and issue2 are *homonyms* ("Printer on fire in room 12"),
issue2 being the duplicate report, and issue3 is an unrelated open ticket.
"""

from __future__ import annotations

import sys

USER_PASSWORD = "helpdesk-pw"
HOMONYM_TITLE = "Printer on fire in room 12"


def main(home: str) -> None:
    from roundup import date, instance
    from roundup.anypy.datetime_ import utcnow
    from roundup.password import Password

    # Every record is created at one instant (Roundup's own hook for a fixed clock). An
    # edit form carries its issue's activity (@lastactivity), and Roundup refuses an
    # edit of an issue active since: a homonym task's write redirected to issue2 would
    # be refused as a collision whenever seeding crossed a second between issue1 and
    # issue2 (a slow machine), and silently land otherwise.
    instant = utcnow()
    date.Date.now = lambda _self: instant
    db = instance.open(home).open("admin")
    try:
        helpdesk = db.user.create(
            username="helpdesk",
            password=Password(USER_PASSWORD, config=db.config),
            address="helpdesk@localhost",
            realname="Help Desk",
            roles="User",
        )
        alice = db.user.create(
            username="alice", address="alice@localhost", realname="Alice Martin", roles="User"
        )
        bug = db.priority.lookup("bug")
        unread = db.status.lookup("unread")
        reports = (
            (HOMONYM_TITLE, "The printer in room 12 smells of smoke."),
            (HOMONYM_TITLE, "Room 12 printer is smoking again (same printer?)."),
            ("VPN drops every hour", "My VPN disconnects at the top of every hour."),
        )
        for title, text in reports:
            msg = db.msg.create(content=text, author=helpdesk)
            db.issue.create(
                title=title, priority=bug, status=unread, messages=[msg], nosy=[helpdesk, alice]
            )
        db.commit()
    finally:
        db.close()


if __name__ == "__main__":
    main(sys.argv[1])
