"""Injury alerts: player sync publishes a rostered player's change to Questionable, Doubtful or Out.

Alerts go straight to waiver_actions (no outbox, no action row) after a passive check that the
queue exists. They carry Sleeper player ids and ``event_type: "INJURY_STATUS_CHANGE"``, and no
team_id, tracking_id or trace context, so a consumer never mistakes one for a claim.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from config.clock import ensure_utc, utcnow
from publisher import validation as v
from publisher.amqp import AmqpPublisher, OutgoingMessage
from publisher.queues import WAIVER_ACTIONS

logger = logging.getLogger(__name__)

EVENT_TYPE = "INJURY_STATUS_CHANGE"
ALERT_STATUSES = frozenset({"Questionable", "Doubtful", "Out"})


@dataclass(frozen=True)
class InjuryChange:
    """A player's injury status as player sync saw it change (Sleeper player id)."""

    player_id: str
    player_name: str
    previous_status: str | None
    status: str | None
    rostered: bool
    nfl_team: str | None = None
    observed_at: datetime | None = None


def alert_body(change: InjuryChange) -> dict[str, object]:
    """The waiver_actions body of one injury alert."""
    observed = ensure_utc(change.observed_at, what="observed_at") if change.observed_at else utcnow()
    return {
        "event_type": EVENT_TYPE,
        "player_id": v.sleeper_id(change.player_id, "player_id"),
        "player_name": change.player_name,
        "nfl_team": change.nfl_team,
        "previous_status": change.previous_status,
        "status": change.status,
        "observed_at": observed.isoformat(),
    }


def should_alert(change: InjuryChange) -> bool:
    """True for a rostered player whose status changed to Questionable, Doubtful or Out."""
    return change.rostered and change.status in ALERT_STATUSES and change.status != change.previous_status


def publish_injury_alerts(changes: Iterable[InjuryChange], *, publisher: AmqpPublisher) -> list[str]:
    """Publish an alert for each change that qualifies; returns the message ids.

    Checks that waiver_actions exists first (MissingQueueError names it); any other failure is
    the PublishError of the first message that was not confirmed.
    """
    messages = [
        OutgoingMessage(queue=WAIVER_ACTIONS, body=alert_body(c), message_id=str(uuid.uuid4()))
        for c in changes
        if should_alert(c)
    ]
    if not messages:
        return []
    publisher.check_queue(WAIVER_ACTIONS)
    outcomes = publisher.publish_many(messages)
    for outcome in outcomes:
        if outcome.error is not None:
            raise outcome.error
    for m in messages:
        logger.info("injury alert published: player_id=%s status=%s", m.body["player_id"], m.body["status"])
    return [m.message_id for m in messages]
