"""The activity outbox: save a message with its action, publish one row at once, mark results, report.

A row is marked published only after the broker confirmed it; every failure leaves it pending
with a backoff, so a saved message is never lost. Only the broker's refusal of the message
(nack, unroutable with its queue present) counts towards OUTBOX_MAX_ATTEMPTS and ``dead``; an
unreachable broker, a lost connection or a missing confirm never does, however long it lasts.
A row that can never be published (a message AMQP cannot encode, headers that are not an
object, a queue that is not an activity outbox queue) is dead at once with its reason; every
dead row is counted (``config.set_aside``) and logged once, and ``retry-dead`` revives it.
Rows are claimed with ``FOR UPDATE SKIP LOCKED`` so a trigger's own publish and any number of
drains never send the same row at once.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from config.backoff import backoff_seconds
from config.clock import utcnow
from config.records import json_fields
from config.set_aside import set_aside
from config.settings import KickoffSettings
from models.activity import ActionStatus
from models.audit import AuditContext
from models.boundary import transaction
from models.outbox import OutboxStatus
from publisher.amqp import AmqpPublisher, OutgoingMessage, PublishOutcome
from publisher.errors import (
    BrokerConnectionError,
    MissingQueueError,
    PublishError,
    PublishRefusedError,
    UnencodableMessageError,
)
from publisher.sql import actions as action_sql
from publisher.sql import outbox as outbox_sql
from publisher.sql.outbox import DeadRow, PendingRow

logger = logging.getLogger(__name__)

#: The loop's name where it sets an item aside (config.set_aside).
LOOP = "activity_outbox"


@dataclass(frozen=True)
class OutboxRow:
    """A claimed outbox row, as the drain and the immediate publish see it."""

    id: int
    message_id: str
    queue: str
    body_json: str
    headers: dict[str, Any]
    tracking_id: str | None
    attempts: int  # the broker's refusals of this message
    expires_at: datetime | None
    tries: int = 0  # every publish try, outages included

    @classmethod
    def from_db(cls, row: Sequence[Any]) -> OutboxRow:
        body = row[3] if isinstance(row[3], str) else json.dumps(row[3])
        raw = row[4]
        headers = raw if isinstance(raw, dict) else {} if raw in (None, "{}") else json.loads(raw)
        if not isinstance(headers, dict):
            raise ValueError(f"its headers are not a JSON object: {raw}")
        return cls(
            id=row[0],
            message_id=str(row[1]),
            queue=row[2],
            body_json=body,
            headers=headers,
            tracking_id=None if row[5] is None else str(row[5]),
            attempts=row[6],
            expires_at=row[7],
            tries=row[8],
        )

    @property
    def body(self) -> dict[str, Any]:
        return json.loads(self.body_json)

    def message(self) -> OutgoingMessage:
        """The message to publish; the stored JSON text is sent as is (no re-encoding)."""
        return OutgoingMessage(
            queue=self.queue,
            body={},
            message_id=self.message_id,
            headers=self.headers,
            raw=self.body_json.encode(),
        )


def insert_row(
    *,
    message: OutgoingMessage,
    tracking_id: str | None,
    next_attempt_at: datetime,
    held_by: str | None = None,
    expires_at: datetime | None = None,
) -> int:
    """Insert one pending outbox row (call inside the transaction that saves its action)."""
    return outbox_sql.insert(
        message_id=message.message_id,
        queue=message.queue,
        body=json.dumps(message.body, default=str),
        headers=json.dumps(message.headers),
        tracking_id=tracking_id,
        held_by=held_by,
        next_attempt_at=next_attempt_at,
        expires_at=expires_at,
        created_at=utcnow(),
    )


def backoff_delay(attempts: int, settings: KickoffSettings) -> timedelta:
    """Delay before retry number ``attempts``: base doubling per attempt, capped at the maximum."""
    return timedelta(
        seconds=backoff_seconds(
            attempts, base=settings.outbox_backoff_base_seconds, cap=settings.outbox_backoff_max_seconds
        )
    )


def mark_published(rows: Sequence[OutboxRow], *, now: datetime) -> None:
    """Mark confirmed rows published and their queued actions delivered (one UPDATE each)."""
    if not rows:
        return
    outbox_sql.mark_published([r.id for r in rows], status=OutboxStatus.PUBLISHED.value, now=now)
    tracking = [r.tracking_id for r in rows if r.tracking_id]
    if tracking:
        action_sql.mark_delivered(
            tracking, status=ActionStatus.DELIVERED.value, from_status=ActionStatus.QUEUED.value, now=now
        )


def counts_as_attempt(error: PublishError) -> bool:
    """True for the broker's refusal of the message (nack, unroutable with its queue present).

    Unavailability (refused or lost connections, timeouts, a confirm that never came) and a
    missing queue (configuration) say nothing about the message and never use up attempts.
    """
    return isinstance(error, PublishRefusedError)


def mark_failed(row: OutboxRow, error: PublishError, *, now: datetime, settings: KickoffSettings) -> str:
    """Record a failed publish: back off, or mark the row dead after OUTBOX_MAX_ATTEMPTS refusals.

    Every failure adds a try and backs off (base doubling per try, capped at
    OUTBOX_BACKOFF_MAX_SECONDS); only a refusal (``counts_as_attempt``) adds an attempt, so an
    outage of any length leaves the row pending. Returns the row's new status.
    """
    refused = counts_as_attempt(error)
    attempts = row.attempts + 1 if refused else row.attempts
    tries = row.tries + 1
    status = OutboxStatus.PENDING
    unencodable = isinstance(error, UnencodableMessageError)  # it never will be: dead at once
    if refused and (unencodable or attempts >= settings.outbox_max_attempts):
        status = OutboxStatus.DEAD
    next_at = now + backoff_delay(tries, settings)
    outbox_sql.mark_failed(
        row.id,
        status=status.value,
        attempts=attempts,
        tries=tries,
        next_attempt_at=next_at,
        error=f"{type(error).__name__}: {error}",
    )
    if status is OutboxStatus.DEAD:
        if row.tracking_id:
            action_sql.fail_queued(
                row.tracking_id, status=ActionStatus.FAILED.value, error=f"delivery failed: {error}", now=now
            )
        set_aside(
            loop=LOOP,
            kind="unencodable" if unencodable else "refused",
            item=_row_name(row.id, row.tracking_id, row.message_id, row.queue),
            reason=f"dead after {attempts} refusals: {error}",
            level=logging.ERROR,  # a dead message is not delivered without an operator
        )
        return status.value
    log = logger.error if isinstance(error, MissingQueueError) else logger.warning
    log(
        "outbox publish failed: tracking_id=%s message_id=%s queue=%s attempts=%s tries=%s status=%s: %s",
        row.tracking_id,
        row.message_id,
        row.queue,
        attempts,
        tries,
        status.value,
        error,
    )
    return status.value


def _row_name(row_id: int, tracking_id: str | None, message_id: str, queue: str) -> str:
    return f"outbox row {row_id} (tracking_id={tracking_id} message_id={message_id} queue={queue})"


def mark_dead(
    row_id: int,
    *,
    tracking_id: str | None,
    message_id: str,
    queue: str,
    kind: str,
    reason: str,
    now: datetime,
) -> None:
    """Set aside a row that can never be published: dead with ``reason``, its queued action failed."""
    outbox_sql.set_status(row_id, status=OutboxStatus.DEAD.value, reason=reason)
    if tracking_id:
        action_sql.fail_queued(
            tracking_id, status=ActionStatus.FAILED.value, error=f"delivery failed: {reason}", now=now
        )
    set_aside(
        loop=LOOP,
        kind=kind,
        item=_row_name(row_id, tracking_id, message_id, queue),
        reason=reason,
        level=logging.ERROR,  # a dead message is not delivered without an operator
    )


def mark_unavailable(
    rows: Sequence[OutboxRow], error: PublishError, *, now: datetime, settings: KickoffSettings
) -> None:
    """Record one unavailability for many rows in one UPDATE: a try each, no attempt, capped backoff.

    An outage fails every row of a batch the same way; one statement and one log line per batch
    keep a long outage with a large backlog from flooding the database and the log.
    """
    if not rows:
        return
    outbox_sql.mark_unavailable(
        [r.id for r in rows],
        error=f"{type(error).__name__}: {error}",
        now=now,
        base_seconds=settings.outbox_backoff_base_seconds,
        max_seconds=settings.outbox_backoff_max_seconds,
    )
    logger.warning(
        "outbox publish of %s rows failed, they stay pending (queues %s, first message_id=%s): %s",
        len(rows),
        ",".join(sorted({r.queue for r in rows})),
        rows[0].message_id,
        error,
    )


def record_outcomes(
    rows: Sequence[OutboxRow], outcomes: Sequence[PublishOutcome], *, now: datetime, settings: KickoffSettings
) -> tuple[int, int]:
    """Apply a batch's broker answers to its rows; returns (published, failed).

    Rows that failed with one shared unavailability error (the connection was refused or lost)
    are recorded together by ``mark_unavailable``; every other failure row by row.
    """
    by_id = {r.message_id: r for r in rows}
    confirmed = [by_id[o.message.message_id] for o in outcomes if o.confirmed]
    mark_published(confirmed, now=now)
    failed = 0
    shared: dict[int, tuple[PublishError, list[OutboxRow]]] = {}
    for outcome in outcomes:
        if outcome.error is None:
            continue
        failed += 1
        row = by_id[outcome.message.message_id]
        if isinstance(outcome.error, BrokerConnectionError):
            shared.setdefault(id(outcome.error), (outcome.error, []))[1].append(row)
        else:
            mark_failed(row, outcome.error, now=now, settings=settings)
    for error, failed_rows in shared.values():
        if len(failed_rows) == 1:
            mark_failed(failed_rows[0], error, now=now, settings=settings)
        else:
            mark_unavailable(failed_rows, error, now=now, settings=settings)
    return len(confirmed), failed


def publish_rows_now(
    outbox_ids: Sequence[int],
    *,
    publisher: AmqpPublisher,
    settings: KickoffSettings,
    traced: bool = True,
) -> dict[int, PublishOutcome]:
    """Publish saved rows at once: outbox id -> the broker's answer, for the rows it could claim.

    One transaction: the claim of the rows still pending (not held, not expired, not taken by
    a drain: ``FOR UPDATE SKIP LOCKED``), the publish with one wait for every confirm, the marks.
    Rows a drain holds or already published are missing from the answer. ``traced``: as
    ``AmqpPublisher.publish_many``'s (False: the spans the rows' headers name record the publish).
    """
    with transaction():
        raw = outbox_sql.claim_many(list(outbox_ids), status=OutboxStatus.PENDING.value, now=utcnow())
        rows = [OutboxRow.from_db(r) for r in raw]
        if not rows:
            return {}
        outcomes = publisher.publish_many([r.message() for r in rows], traced=traced)
        record_outcomes(rows, outcomes, now=utcnow(), settings=settings)
    return {row.id: outcome for row, outcome in zip(rows, outcomes, strict=True)}


@dataclass(frozen=True)
class OutboxReport:
    """Backlog, held claims, the oldest pending rows and age, and dead rows of the activity outbox."""

    backlog: int
    held: int
    oldest_pending_age_seconds: float | None
    dead: int
    dead_rows: tuple[DeadRow, ...]
    backlog_by_queue: dict[str, int]
    oldest_pending: tuple[PendingRow, ...] = ()

    as_json = json_fields


def outbox_report(
    *, now: datetime | None = None, dead_limit: int = 20, pending_limit: int = 10
) -> OutboxReport:
    """Read the outbox state (pending rows not held count as backlog); the ``pending_limit``
    oldest pending rows not held come with their attempts, tries, next attempt time and last error."""
    now = now or utcnow()
    by_queue = outbox_sql.due_by_queue()
    counts = outbox_sql.held_and_oldest_due()
    dead = outbox_sql.count_dead()
    dead_rows = tuple(outbox_sql.list_dead(dead_limit))
    oldest_pending = tuple(outbox_sql.list_due(pending_limit))
    oldest = counts.oldest_due_created_at
    age = None if oldest is None else max((now - oldest).total_seconds(), 0.0)
    return OutboxReport(
        backlog=sum(by_queue.values()),
        held=counts.held,
        oldest_pending_age_seconds=age,
        dead=dead,
        dead_rows=dead_rows,
        backlog_by_queue=by_queue,
        oldest_pending=oldest_pending,
    )


@dataclass(frozen=True)
class RetryDeadReport:
    """What `kickoff outbox retry-dead` did."""

    rows: int  # dead rows made pending again with a fresh attempt budget
    actions: int  # their failed actions restored to queued (key held again)
    superseded: int  # rows left dead: their key was released and a newer action holds it now

    def as_json(self) -> dict[str, int]:
        return {"rows": self.rows, "actions": self.actions, "superseded": self.superseded}


def retry_dead(
    *,
    now: datetime | None = None,
    ids: Sequence[int] | None = None,
    audit: AuditContext | None = None,
) -> RetryDeadReport:
    """Make every dead row (or the dead rows among ``ids``) pending again with a fresh attempt budget,
    and its action whole.

    The row's action goes back from ``failed`` to ``queued`` (so delivery marks it delivered),
    holding its idempotency key again; a key released meanwhile is taken back unless a newer
    action holds it, in which case the row stays dead (``superseded``): sending it would make
    two moves for one key. With ``audit``, the retry is audited (outbox.retry_dead) in its transaction.
    """
    now = now or utcnow()
    rows = actions = superseded = 0
    revived: list[int] = []
    with transaction():
        for row in outbox_sql.dead_for_update(None if ids is None else list(ids)):
            outbox_id, tracking_id, released = row.outbox_id, row.tracking_id, row.released_key
            if tracking_id is not None and row.status == ActionStatus.FAILED.value:
                if row.idempotency_key is None and released is not None:
                    assert row.league_id is not None and row.kind is not None  # the action exists
                    if action_sql.key_held(league_id=row.league_id, kind=row.kind, key=released):
                        superseded += 1
                        logger.warning(
                            "dead row %s left dead: key %s now belongs to a newer action", outbox_id, released
                        )
                        continue
                action_sql.requeue_taking_key_back(tracking_id, status=ActionStatus.QUEUED.value, now=now)
                actions += 1
            outbox_sql.revive(outbox_id, now=now)
            rows += 1
            revived.append(outbox_id)
        if audit is not None:
            audit.record(
                "outbox.retry_dead",
                "outbox",
                None if ids is None else ",".join(str(i) for i in ids),
                after={"rows": revived, "actions": actions, "superseded": superseded},
            )
    if rows or superseded:
        logger.info(
            "retry-dead: %s rows pending again, %s actions queued, %s superseded", rows, actions, superseded
        )
    return RetryDeadReport(rows=rows, actions=actions, superseded=superseded)
