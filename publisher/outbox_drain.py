"""The one drain of every outbox: the ``Outbox`` protocol, the batch, the loop and their ``DrainReport``.

Both outboxes, the activity outbox (``publisher.drain``: trigger queues) and the run outbox
(``runs.publish``: job_runs), drain the same way: each batch is claimed, published with pipelined
confirms and marked inside one transaction, so a crash between publish and mark rolls the claim
back and the rows are published again with the same message ids (consumers drop the duplicate).
An outbox supplies only what differs: which rows a batch takes (``claim``), the message of each
row it can send and what it does with the others (``sendable``), and how the broker's answers are
marked (``record``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields, replace
from datetime import datetime
from typing import Any, Generic, Protocol, TypeVar

from config.clock import utcnow
from config.records import json_fields
from models.boundary import transaction
from publisher.amqp import OutgoingMessage, PublishOutcome

logger = logging.getLogger(__name__)

RowT = TypeVar("RowT")


@dataclass(frozen=True)
class DrainReport:
    """What a drain (or one publish of saved rows) did; each outbox reports the fields it names
    (``Outbox.report_fields``). ``broker_error`` says why a drain stopped early (broker unreachable)."""

    batches: int = 0  # batches claimed
    published: int = 0  # confirmed by the broker and marked published
    failed: int = 0  # not published: tried again later (the activity outbox also counts rows it set aside)
    expired: int = 0  # activity outbox: draft targets past their deadline, never sent
    stale: int = 0  # run outbox: the run was no longer queued at that attempt; marked without sending
    dead: int = 0  # run outbox: set aside (the payload is not a RunCommand of its row or cannot be encoded)
    released: int = 0  # activity outbox: chained claims released (their IR move succeeded)
    cancelled: int = 0  # activity outbox: chained claims cancelled (parent failed or the hold ran out)
    trades: int = 0  # activity outbox: pending (known unsent) trade claims republished and confirmed
    broker_error: str | None = None

    def __add__(self, other: DrainReport) -> DrainReport:
        counts = (
            getattr(self, f.name) + getattr(other, f.name) for f in fields(self) if f.name != "broker_error"
        )
        return DrainReport(*counts, broker_error=self.broker_error or other.broker_error)

    def as_json(self, names: Sequence[str] | None = None) -> dict[str, Any]:
        """The report as a JSON-ready dict: every field, or only ``names`` (an outbox's report_fields)."""
        every = json_fields(self)
        return every if names is None else {name: every[name] for name in names}


class MessagePublisher(Protocol):
    """What an outbox publishes with: publisher.amqp.AmqpPublisher (confirmed, mandatory, passive declare)."""

    def publish_many(self, messages: Sequence[OutgoingMessage]) -> list[PublishOutcome]: ...


@dataclass(frozen=True)
class Sendable(Generic[RowT]):
    """The rows of a claimed batch an outbox can send, their messages (same order), and the counts
    of the rows it handled without sending (stale, expired, set aside)."""

    rows: list[RowT]
    messages: list[OutgoingMessage]
    handled: DrainReport


class Outbox(Protocol[RowT]):
    """What one outbox supplies to the drain; the drain calls all three inside one transaction."""

    #: The DrainReport fields its surfaces print (``kickoff outbox drain``, ``kickoff runs drain``).
    report_fields: tuple[str, ...]

    def claim(self, limit: int, *, now: datetime) -> Sequence[RowT]:
        """Lock up to ``limit`` rows due at ``now``, oldest first, ``FOR UPDATE SKIP LOCKED``."""
        ...

    def sendable(self, rows: Sequence[RowT], *, now: datetime) -> Sendable[RowT]:
        """The claimed rows to publish with their messages; every other row is marked here and counted."""
        ...

    def record(
        self, rows: Sequence[RowT], outcomes: Sequence[PublishOutcome], *, now: datetime
    ) -> DrainReport:
        """Mark the published rows' outcomes (one per row, same order): published, failed or set aside."""
        ...


def send_claimed(outbox: Outbox[RowT], rows: Sequence[RowT], *, publisher: MessagePublisher) -> DrainReport:
    """Publish ``rows`` (claimed in the caller's transaction) and mark them; ``batches`` is not counted."""
    sendable = outbox.sendable(rows, now=utcnow())
    if not sendable.rows:
        return sendable.handled
    outcomes = publisher.publish_many(sendable.messages)
    return sendable.handled + outbox.record(sendable.rows, outcomes, now=utcnow())


def drain_batch(outbox: Outbox[RowT], *, publisher: MessagePublisher, limit: int) -> DrainReport:
    """Claim, publish and mark one batch of up to ``limit`` rows in one transaction (empty: none due)."""
    with transaction():
        rows = outbox.claim(limit, now=utcnow())
        if not rows:
            return DrainReport()
        return replace(send_claimed(outbox, rows, publisher=publisher), batches=1)


def drain(
    outbox: Outbox[RowT],
    *,
    publisher: MessagePublisher,
    batch_size: int,
    max_seconds: float | None = None,
    max_batches: int | None = None,
    broker_unreachable: Callable[[], str | None] | None = None,
) -> DrainReport:
    """Drain ``outbox`` batch by batch until no row is due, ``max_seconds`` passed (checked before
    each batch) or ``max_batches`` were taken.

    After a batch of which nothing was published and something failed, ``broker_unreachable``
    (None when the broker answers, else its one-line error) decides whether to stop early: the
    rows keep their backoff, and the report carries the error.
    """
    deadline = None if max_seconds is None else time.monotonic() + max_seconds
    report = DrainReport()
    while deadline is None or time.monotonic() < deadline:
        batch = drain_batch(outbox, publisher=publisher, limit=batch_size)
        if not batch.batches:
            break
        report += batch
        if batch.failed and not batch.published and broker_unreachable is not None:
            error = broker_unreachable()
            if error is not None:
                logger.warning("outbox drain stopped: %s (%s rows failed)", error, batch.failed)
                return replace(report, broker_error=error)
        if max_batches is not None and report.batches >= max_batches:
            break
    return report
