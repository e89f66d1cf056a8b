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
    FAILED = "failed"  # the publish surely did not happen (not sent); a retry may publish again
    UNCERTAIN = "uncertain"  # sent but unconfirmed: an operator must reconcile it by hand
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
