"""The statuses of a trade claim (made before it is published); SQL in publisher/sql/trades.py."""

from __future__ import annotations

from enum import StrEnum


class ExecutionStatus(StrEnum):
    """Where a trade claim stands."""

    CLAIMED = "claimed"  # claimed, publish in progress (a crash here leaves it for reconciliation)
    PUBLISHED = "published"  # the broker confirmed the message
    PENDING = "pending"  # not sent: the broker was unreachable; the drain republishes it (same message id)
    FAILED = "failed"  # the broker refused it (nack, unroutable, declare refused); any claim may be retried
    UNCERTAIN = "uncertain"  # sent, unconfirmed: waits for an operator (kickoff trades reconcile)
    SET_ASIDE = "set_aside"  # the drain could not handle it (the reason in error): waits for an operator
    RESOLVED = "resolved"  # an operator said the worker got it (see resolution): nothing more is sent
    CANCELLED = "cancelled"  # an operator cancelled it: never sent again (its key stays claimed)
