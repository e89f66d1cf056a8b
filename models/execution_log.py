"""The statuses of a trade claim (made before it is published); SQL in publisher/sql/trades.py."""

from __future__ import annotations

from enum import StrEnum


class ExecutionStatus(StrEnum):
    """Where a trade claim stands."""

    CLAIMED = "claimed"  # claimed, publish in progress (a crash here leaves it for reconciliation)
    PUBLISHED = "published"  # the broker confirmed the message
    PENDING = "pending"  # not sent: the broker was unreachable; the drain republishes it (same message id)
    FAILED = "failed"  # the broker refused it (nack, unroutable, declare refused); a decision may be retried
    UNCERTAIN = "uncertain"  # sent, unconfirmed: the drain republishes it (same message id), or an operator
    RESOLVED = "resolved"  # an operator reconciled it (see resolution)
