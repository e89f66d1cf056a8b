"""The seven RabbitMQ queues kickoff publishes to, and how each one is reached."""

from __future__ import annotations

from enum import StrEnum


class Path(StrEnum):
    """How messages reach a queue."""

    OUTBOX = "outbox"  # saved with the action in one transaction, published at once, drained on failure
    DIRECT = "direct"  # published straight away (trades claim execution_log first; alerts have no row)
    RUN_OUTBOX = "run_outbox"  # job_runs: run_log row + job_run_outbox row, then publish_run


LINEUP_UPDATES = "lineup_updates"
WAIVER_ACTIONS = "waiver_actions"
DRAFT_TARGETS = "draft_targets"
TRADE_SUBMISSIONS = "trade_submissions"
TRADE_RESPONSES = "trade_responses"
TRADE_NEGOTIATIONS = "trade_negotiations"
JOB_RUNS = "job_runs"

#: Every queue, in the spec's order.
ALL_QUEUES: tuple[str, ...] = (
    LINEUP_UPDATES,
    WAIVER_ACTIONS,
    DRAFT_TARGETS,
    TRADE_SUBMISSIONS,
    TRADE_RESPONSES,
    TRADE_NEGOTIATIONS,
    JOB_RUNS,
)

#: Queues fed by an outbox: declared passive on publish, so they must exist on the broker.
OUTBOX_QUEUES: tuple[str, ...] = (LINEUP_UPDATES, WAIVER_ACTIONS, DRAFT_TARGETS, JOB_RUNS)

#: Queues of the activity outbox (triggers); job_runs has its own run outbox.
TRIGGER_QUEUES: tuple[str, ...] = (LINEUP_UPDATES, WAIVER_ACTIONS, DRAFT_TARGETS)

#: Trade queues: published directly and declared durable on publish.
TRADE_QUEUES: tuple[str, ...] = (TRADE_SUBMISSIONS, TRADE_RESPONSES, TRADE_NEGOTIATIONS)

PATHS: dict[str, Path] = {
    LINEUP_UPDATES: Path.OUTBOX,
    WAIVER_ACTIONS: Path.OUTBOX,
    DRAFT_TARGETS: Path.OUTBOX,
    TRADE_SUBMISSIONS: Path.DIRECT,
    TRADE_RESPONSES: Path.DIRECT,
    TRADE_NEGOTIATIONS: Path.DIRECT,
    JOB_RUNS: Path.RUN_OUTBOX,
}


def declare_passive(queue: str) -> bool:
    """True when publishing to ``queue`` must only check it exists (outbox queues)."""
    return queue in OUTBOX_QUEUES
