"""The activity outbox's drain: publish due outbox rows in batches, expire draft targets, resolve held claims.

The batches run in the one drain of every outbox (``publisher.outbox_drain``; ``ActivityOutbox``
supplies this outbox's rows and marks): each is claimed inside one transaction with ``FOR UPDATE
SKIP LOCKED``, published with pipelined confirms, and marked published with one UPDATE; failures
back off exponentially (capped) and only the broker's refusals of a message make it dead after
OUTBOX_MAX_ATTEMPTS: an outage leaves every row pending however long it lasts. A crash between
publish and mark rolls the transaction back, so the row is published again with the same message
id (consumers drop the duplicate).

Each row is handled on its own: one that can never be published (headers that are not an object,
a queue that is not an activity outbox queue, a message AMQP cannot encode) is marked dead at
once with its reason, counted and logged once, and the rest of its batch is published.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from config.clock import utcnow
from config.settings import KickoffSettings
from models.activity import ActionStatus
from models.audit import AuditContext
from models.boundary import transaction
from models.db import release_connection
from models.outbox import OutboxStatus
from publisher.amqp import AmqpPublisher, PublishOutcome, publisher_from_settings
from publisher.errors import BrokerConnectionError
from publisher.outbox import OutboxRow, mark_dead, record_outcomes
from publisher.outbox_drain import DrainReport, Sendable, drain
from publisher.queues import TRIGGER_QUEUES
from publisher.sql import actions as action_sql
from publisher.sql import outbox as outbox_sql
from publisher.trades import redeliver_trades, redeliverable_trades

logger = logging.getLogger(__name__)


#: The DrainReport fields of an activity outbox drain (``kickoff outbox drain --json``, the actor).
REPORT_FIELDS = (
    "batches",
    "published",
    "failed",
    "expired",
    "released",
    "cancelled",
    "trades",
    "broker_error",
)


def _skip_action(tracking_id: str, reason: str, *, now: datetime) -> None:
    """Mark an action skipped and release its key, so a fresh request can queue a new one."""
    action_sql.finish_releasing_key(tracking_id, status=ActionStatus.SKIPPED.value, reason=reason, now=now)


def resolve_held_claims(*, now: datetime | None = None) -> tuple[int, int]:
    """Release chained claims whose IR move succeeded; cancel those whose parent failed or hold ran out.

    A parent still queued, delivered or running (including one whose publish is being retried,
    a transient failure) keeps the claim held until its hold_until. Returns (released, cancelled).
    """
    now = now or utcnow()
    released = cancelled = 0
    with transaction():
        for claim in outbox_sql.held_claims_for_update():
            tracking_id, parent_status = str(claim.tracking_id), claim.parent_status
            if parent_status == ActionStatus.SUCCEEDED.value:
                outbox_sql.release_hold(claim.outbox_id, now=now)
                released += 1
                logger.info("chained claim released: tracking_id=%s", tracking_id)
                continue
            if parent_status in (None, ActionStatus.FAILED.value, ActionStatus.SKIPPED.value):
                reason = f"cancelled: parent IR move {parent_status or 'missing'}"
            elif claim.hold_until is not None and now >= claim.hold_until:
                reason = "cancelled: parent IR move did not finish within the hold"
            else:
                continue
            outbox_sql.set_status(claim.outbox_id, status=OutboxStatus.CANCELLED.value, reason=reason)
            _skip_action(tracking_id, reason, now=now)
            cancelled += 1
            logger.warning("chained claim %s: tracking_id=%s", reason, tracking_id)
    return released, cancelled


def _readable_rows(raw: Sequence[outbox_sql.StoredRow], *, now: datetime) -> list[OutboxRow]:
    """The claimed rows that can be published; each of the others is marked dead with its reason."""
    rows: list[OutboxRow] = []
    for r in raw:
        row_id, message_id, queue = r.id, str(r.message_id), str(r.queue)
        tracking = None if r.tracking_id is None else str(r.tracking_id)
        if queue not in TRIGGER_QUEUES:
            reason = f"queue {queue!r} is not an activity outbox queue ({', '.join(TRIGGER_QUEUES)})"
            kind = "unknown_queue"
        else:
            try:
                rows.append(OutboxRow.from_db(r))
                continue
            except (TypeError, ValueError) as exc:
                reason, kind = f"the row cannot be read: {exc}", "unreadable"
        mark_dead(
            row_id,
            tracking_id=tracking,
            message_id=message_id,
            queue=queue,
            kind=kind,
            reason=reason,
            now=now,
        )
    return rows


@dataclass(frozen=True)
class ActivityOutbox:
    """The activity outbox as the drain (publisher.outbox_drain) sees it: due rows, draft targets
    expired before sending, rows that can never be published set aside (counted as failed)."""

    settings: KickoffSettings
    report_fields: tuple[str, ...] = field(default=REPORT_FIELDS, init=False)

    def claim(self, limit: int, *, now: datetime) -> list[outbox_sql.StoredRow]:
        return outbox_sql.claim_due(now=now, limit=limit)

    def sendable(self, rows: Sequence[outbox_sql.StoredRow], *, now: datetime) -> Sendable[OutboxRow]:
        readable = _readable_rows(rows, now=now)
        live: list[OutboxRow] = []
        expired: list[OutboxRow] = []
        for r in readable:
            (live if r.expires_at is None or r.expires_at > now else expired).append(r)
        if expired:
            outbox_sql.expire([r.id for r in expired], status=OutboxStatus.EXPIRED.value)
            for r in expired:
                if r.tracking_id:
                    _skip_action(r.tracking_id, "expired: the pick's deadline passed in the outbox", now=now)
                logger.warning("draft target expired in the outbox: tracking_id=%s", r.tracking_id)
        handled = DrainReport(failed=len(rows) - len(readable), expired=len(expired))
        return Sendable(live, [r.message() for r in live], handled)

    def record(
        self, rows: Sequence[OutboxRow], outcomes: Sequence[PublishOutcome], *, now: datetime
    ) -> DrainReport:
        published, failed = record_outcomes(rows, outcomes, now=now, settings=self.settings)
        return DrainReport(published=published, failed=failed)


def drain_outbox(
    *,
    publisher: AmqpPublisher,
    settings: KickoffSettings,
    max_seconds: float | None = None,
    batch_size: int | None = None,
    resolve_claims: bool = True,
) -> DrainReport:
    """Resolve held claims, then publish due rows batch by batch until none are due or time is up.

    Stops early when the broker is unreachable (the rows keep their backoff).
    """
    released, cancelled = resolve_held_claims() if resolve_claims else (0, 0)
    report = DrainReport(released=released, cancelled=cancelled) + drain(
        ActivityOutbox(settings),
        publisher=publisher,
        batch_size=batch_size or settings.outbox_batch_size,
        max_seconds=max_seconds if max_seconds is not None else settings.outbox_drain_max_seconds,
        broker_unreachable=lambda: _broker_unreachable(publisher),
    )
    if report.batches or released or cancelled:
        logger.info("outbox drain: %s", report.as_json(REPORT_FIELDS))
    return report


def drain_outbox_concurrently(
    *,
    settings: KickoffSettings,
    workers: int | None = None,
    max_seconds: float | None = None,
    batch_size: int | None = None,
    publisher_factory: Callable[[], AmqpPublisher] | None = None,
    all_due: bool = False,
    audit: AuditContext | None = None,
) -> DrainReport:
    """Resolve held claims and republish pending (known unsent) trade claims once, then run
    ``workers`` drains side by side (OUTBOX_DRAIN_WORKERS).

    ``all_due``: every pending row not held is made due first (``make_all_due``, backoffs ignored).
    With ``audit``, the drain is audited (outbox.drain) before it starts.

    Each drain has its own AMQP connection (``publisher_factory``, default: AMQP_URL) and its own
    database connection; ``FOR UPDATE SKIP LOCKED`` keeps their batches apart, so a row is still
    published by one drain only. The drains take turns to write a batch (``AmqpLink.send_turn``):
    one writes while the others await their confirms, mark their rows and claim the next batch.
    """
    if audit is not None:
        audit.record("outbox.drain", "outbox", None, after={"now": all_due, "workers": workers})
    if all_due:
        make_all_due()
    workers = workers or settings.outbox_drain_workers
    make_publisher = publisher_factory or (lambda: publisher_from_settings(settings))
    released, cancelled = resolve_held_claims()
    trades = _redeliver_trades(make_publisher)
    reports: list[DrainReport] = []
    errors: list[BaseException] = []
    send_turn = threading.Lock()  # one drain writes its batch while the others await confirms

    def run() -> None:
        try:
            with make_publisher() as publisher:
                if workers > 1 and isinstance(publisher, AmqpPublisher):
                    publisher.link.send_turn = send_turn
                reports.append(
                    drain_outbox(
                        publisher=publisher,
                        settings=settings,
                        max_seconds=max_seconds,
                        batch_size=batch_size,
                        resolve_claims=False,
                    )
                )
        except BaseException as exc:  # re-raised in the caller's thread below
            errors.append(exc)
        finally:
            release_connection()

    release_connection()  # this thread's connection goes back to the pool while the drains use theirs
    threads = [threading.Thread(target=run, name=f"outbox-drain-{n}") for n in range(workers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]
    total = sum(reports, DrainReport(released=released, cancelled=cancelled, trades=trades))
    if workers > 1 and (total.batches or released or cancelled):
        logger.info("outbox drain (%d workers): %s", workers, total.as_json(REPORT_FIELDS))
    return total


def _redeliver_trades(make_publisher: Callable[[], AmqpPublisher]) -> int:
    """Republish pending trade claims (connects only when there are some; uncertain ones are left)."""
    if not redeliverable_trades():
        return 0
    with make_publisher() as publisher:
        return redeliver_trades(publisher=publisher).published


def _broker_unreachable(publisher: AmqpPublisher) -> str | None:
    """None when RabbitMQ answers; else the one-line error naming AMQP_URL."""
    try:
        publisher.declare_durable([])
    except BrokerConnectionError as exc:
        return str(exc)
    return None


def make_all_due(*, now: datetime | None = None) -> int:
    """Make every pending row that is not held due now (``kickoff outbox drain --now``); returns how many."""
    now = now or utcnow()
    with transaction():
        return outbox_sql.pull_backoff_in(now=now)
