"""The statuses of an activity action (a lineup, waiver or draft-pick request); SQL: publisher/sql."""

from __future__ import annotations

from enum import StrEnum


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
