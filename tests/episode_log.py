"""Test helpers shared by several test modules (moved from test_episodes.py)."""

from __future__ import annotations

from typing import Any

from effectbench.core.codec import converter
from effectbench.core.events import (
    ArmAction,
    ArmStarted,
    ArmTelemetry,
    EpisodeFinished,
    EpisodePlanned,
    EpisodeProvisioned,
    PostRead,
    PreSnapshot,
    Reported,
    event_data,
)
from effectbench.core.hashing import content_hash
from effectbench.core.model import (
    Effect,
    FieldEquals,
    ParamRef,
    RecordWritten,
    Snapshot,
)
from effectbench.log.reader import LoggedEvent

NOTE = "triage note 43b6666f11c2"


EFFECT = Effect(
    RecordWritten(table="encounters", selector={"patient_id": "p1", "type": "Triage"}),
    (FieldEquals("note", ParamRef("note")),),
)


GOOD_ROW = {"id": 1, "patient_id": "p1", "type": "Triage", "note": NOTE}


class Log:
    """Builds LoggedEvents with consecutive seqs, as the reader would hand them out."""

    def __init__(self) -> None:
        self.events: list[LoggedEvent] = []

    def add(self, ep: str | None, event: Any) -> LoggedEvent:
        seq = len(self.events)
        e = LoggedEvent(seq, event.TYPE, 1000.0 + seq, ep, event_data(event), seq + 1)
        self.events.append(e)
        return e

    def planned(self, ep: str, ca: bool = True, category: str = "control") -> None:
        self.add(
            ep,
            EpisodePlanned(
                arm=ep.split("::")[0],
                task_id="mockmed::ok",
                trial=0,
                params={"note": NOTE, "record_key": "key-43b6666f11c2"},
                category=category,
                substrate="web",
                split="dev",
                reversible=False,
                effect_declared=True,
                correct_action_available=ca,
                effect=converter.unstructure(EFFECT),
                effect_hash=content_hash(EFFECT),
            ),
        )

    def attempt(
        self,
        ep: str,
        post: Snapshot,
        reported: bool = True,
        pre: Snapshot | None = None,
        telemetry: bool = True,
    ) -> None:
        self.add(ep, EpisodeProvisioned(setup_ms=12.5))
        self.add(
            ep, PreSnapshot(attempt=0, snapshot=_snap(pre or Snapshot(True, {"encounters": ()})))
        )
        self.add(ep, ArmStarted())
        self.add(ep, ArmAction(kind="click", detail={"target": "save"}))
        if telemetry:
            self.add(
                ep,
                ArmTelemetry(
                    model_calls=3, input_tokens=100, output_tokens=20, cost_usd=None, actions=1
                ),
            )
        self.add(
            ep, Reported(reported_success=reported, halted=not reported, message="", wall_ms=40.0)
        )
        self.add(ep, PostRead(attempt=0, snapshot=_snap(post)))

    def run(self, ep: str, post: Snapshot, **kw: Any) -> None:
        self.planned(ep, ca=kw.pop("ca", True))
        self.attempt(ep, post, **kw)
        self.add(ep, EpisodeFinished())

    def of(self, ep: str) -> list[LoggedEvent]:
        return [e for e in self.events if e.ep == ep]


def _snap(s: Snapshot) -> dict[str, Any]:
    data: dict[str, Any] = converter.unstructure(s)
    return data


def rows(*r: dict[str, Any]) -> Snapshot:
    return Snapshot(True, {"encounters": tuple(r)})
