"""ActivityAction: one trigger request (lineup, waiver, draft pick) and its delivery status."""

from __future__ import annotations

from enum import StrEnum

import peewee
from playhouse.postgres_ext import BinaryJSONField

from config.clock import utcnow
from models.base import BaseModel, UTCDateTimeField


class ActionStatus(StrEnum):
    """Where an activity action stands; the first three keep the idempotency key however old."""

    QUEUED = "queued"  # saved with its outbox message; not yet confirmed by the broker (or held)
    DELIVERED = "delivered"  # the broker confirmed the message; the worker has not reported yet
    RUNNING = "running"  # the worker reported it is acting on ESPN
    SUCCEEDED = "succeeded"  # the worker's result was verified
    FAILED = "failed"  # the worker or delivery failed for good
    SKIPPED = "skipped"  # never sent: a cancelled chained claim or an expired draft target


#: Statuses that keep the action's idempotency key regardless of its age.
PENDING_STATUSES: frozenset[ActionStatus] = frozenset(
    {ActionStatus.QUEUED, ActionStatus.DELIVERED, ActionStatus.RUNNING}
)


class ActivityAction(BaseModel):
    """A trigger request; ``kind`` is the queue name, ``tracking_id`` the human-facing UUID."""

    tracking_id = peewee.UUIDField(unique=True)
    league_id = peewee.TextField()
    kind = peewee.TextField()
    idempotency_key = peewee.TextField(null=True)
    released_key = peewee.TextField(null=True)
    team = peewee.TextField(null=True)
    status = peewee.TextField(default=ActionStatus.QUEUED.value)
    request = BinaryJSONField(default=dict)
    decision_inputs = BinaryJSONField(default=dict)
    after_tracking_id = peewee.UUIDField(null=True)
    hold_until = UTCDateTimeField(null=True)
    run_id = peewee.TextField(null=True)
    traceparent = peewee.TextField(null=True)
    error = peewee.TextField(null=True)
    created_at = UTCDateTimeField(default=utcnow)
    updated_at = UTCDateTimeField(default=utcnow)
    finished_at = UTCDateTimeField(null=True)

    class Meta:
        table_name = "activity_actions"
