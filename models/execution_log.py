"""ExecutionLogEntry: the claim of a trade offer, decision or counter, made before it is published."""

from __future__ import annotations

from enum import StrEnum

import peewee
from playhouse.postgres_ext import BinaryJSONField

from config.clock import utcnow
from models.base import BaseModel, UTCDateTimeField


class ExecutionStatus(StrEnum):
    """Where a trade claim stands."""

    CLAIMED = "claimed"  # claimed, publish in progress (a crash here leaves it for reconciliation)
    PUBLISHED = "published"  # the broker confirmed the message
    PENDING = "pending"  # not sent: the broker was unreachable; the drain republishes it (same message id)
    FAILED = "failed"  # the broker refused it (nack, unroutable, declare refused); a decision may be retried
    UNCERTAIN = "uncertain"  # sent, unconfirmed: the drain republishes it (same message id), or an operator
    RESOLVED = "resolved"  # an operator reconciled it (see resolution)


class ExecutionLogEntry(BaseModel):
    """One trade claim; unique per (queue, claim_key)."""

    claim_key = peewee.TextField()
    queue = peewee.TextField()
    league_id = peewee.TextField()
    team = peewee.TextField(null=True)
    message_id = peewee.UUIDField(unique=True)
    body = BinaryJSONField()
    status = peewee.TextField(default=ExecutionStatus.CLAIMED.value)
    error = peewee.TextField(null=True)
    resolution = peewee.TextField(null=True)
    resolved_by = peewee.TextField(null=True)
    resolved_at = UTCDateTimeField(null=True)
    result = BinaryJSONField(null=True)
    created_at = UTCDateTimeField(default=utcnow)
    updated_at = UTCDateTimeField(default=utcnow)

    class Meta:
        table_name = "execution_log"
