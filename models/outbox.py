"""The statuses of an outbox message (saved with its action, published by the drain); SQL: publisher/sql."""

from __future__ import annotations

from enum import StrEnum


class OutboxStatus(StrEnum):
    """Where an outbox row stands."""

    PENDING = "pending"  # not yet confirmed by the broker; the drain retries it when due
    PUBLISHED = "published"  # the broker confirmed it (published_at set)
    DEAD = "dead"  # refused by the broker OUTBOX_MAX_ATTEMPTS times; shown by `kickoff outbox status`
    EXPIRED = "expired"  # a draft target whose pick deadline passed before it was published
    CANCELLED = "cancelled"  # a chained claim whose parent failed or whose hold ran out
