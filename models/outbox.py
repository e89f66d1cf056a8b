"""OutboxMessage: a message saved with its action, published (and retried) by the drain."""

from __future__ import annotations

from enum import StrEnum

import peewee
from playhouse.postgres_ext import BinaryJSONField

from config.clock import utcnow
from models.base import BaseModel, UTCDateTimeField


class OutboxStatus(StrEnum):
    """Where an outbox row stands."""

    PENDING = "pending"  # not yet confirmed by the broker; the drain retries it when due
    PUBLISHED = "published"  # the broker confirmed it (published_at set)
    DEAD = "dead"  # refused by the broker OUTBOX_MAX_ATTEMPTS times; shown by `kickoff outbox status`
    EXPIRED = "expired"  # a draft target whose pick deadline passed before it was published
    CANCELLED = "cancelled"  # a chained claim whose parent failed or whose hold ran out


class OutboxMessage(BaseModel):
    """One message for an outbox queue; ``message_id`` is the AMQP message id."""

    message_id = peewee.UUIDField(unique=True)
    queue = peewee.TextField()
    body = BinaryJSONField()
    headers = BinaryJSONField(default=dict)
    tracking_id = peewee.UUIDField(null=True)
    status = peewee.TextField(default=OutboxStatus.PENDING.value)
    held_by = peewee.UUIDField(null=True)
    attempts = peewee.IntegerField(default=0)  # the broker's refusals (nack, unroutable); dead at the max
    tries = peewee.IntegerField(default=0)  # every publish try, outages included (sets the backoff)
    next_attempt_at = UTCDateTimeField(default=utcnow)
    expires_at = UTCDateTimeField(null=True)
    published_at = UTCDateTimeField(null=True)
    last_error = peewee.TextField(null=True)
    created_at = UTCDateTimeField(default=utcnow)

    class Meta:
        table_name = "outbox_messages"
