"""The RabbitMQ queues kickoff publishes to, and how each one is reached.

The trigger queues come from their declarations (``publisher.trigger_queues``); the trade queues
and job_runs are named here.
"""

from __future__ import annotations

from enum import StrEnum

from publisher.trigger_queues import DRAFT_PICK, LINEUP, WAIVER, trigger_queues


class Delivery(StrEnum):
    """How messages reach a queue."""

    OUTBOX = "outbox"  # saved with the action in one transaction, published at once, drained on failure
    DIRECT = "direct"  # published straight away (trades claim execution_log first; alerts have no row)
    RUN_OUTBOX = "run_outbox"  # job_runs: run_log row + job_run_outbox row, then publish_run


LINEUP_UPDATES = LINEUP.name
WAIVER_ACTIONS = WAIVER.name
DRAFT_TARGETS = DRAFT_PICK.name
TRADE_SUBMISSIONS = "trade_submissions"
TRADE_RESPONSES = "trade_responses"
TRADE_NEGOTIATIONS = "trade_negotiations"
JOB_RUNS = "job_runs"

#: Queues of the activity outbox (triggers), in declaration order; job_runs has its own run outbox.
TRIGGER_QUEUES: tuple[str, ...] = tuple(q.name for q in trigger_queues())

#: Trade queues: published directly and declared durable on publish.
TRADE_QUEUES: tuple[str, ...] = (TRADE_SUBMISSIONS, TRADE_RESPONSES, TRADE_NEGOTIATIONS)

#: Every queue, in the spec's order.
ALL_QUEUES: tuple[str, ...] = (*TRIGGER_QUEUES, *TRADE_QUEUES, JOB_RUNS)

#: Queues fed by an outbox: declared passive on publish, so they must exist on the broker.
OUTBOX_QUEUES: tuple[str, ...] = (*TRIGGER_QUEUES, JOB_RUNS)

#: How each queue is reached.
DELIVERY: dict[str, Delivery] = {
    **dict.fromkeys(TRIGGER_QUEUES, Delivery.OUTBOX),
    **dict.fromkeys(TRADE_QUEUES, Delivery.DIRECT),
    JOB_RUNS: Delivery.RUN_OUTBOX,
}


def declare_passive(queue: str) -> bool:
    """True when publishing to ``queue`` must only check it exists (outbox queues, also a trigger
    queue declared in this process after import)."""
    return queue in OUTBOX_QUEUES or any(q.name == queue for q in trigger_queues())
