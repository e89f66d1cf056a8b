"""The drain runner: publish due outbox rows in batches, expire draft targets, resolve held claims.

Each batch is claimed inside one transaction with ``FOR UPDATE SKIP LOCKED``, published with
pipelined confirms, and marked published with one UPDATE; failures back off exponentially (capped)
and only the broker's refusals of a message make it dead after OUTBOX_MAX_ATTEMPTS: an outage
leaves every row pending however long it lasts. A crash between publish and mark rolls the transaction
back, so the row is published again with the same message id (consumers drop the duplicate).

Each row is handled on its own: one that can never be published (headers that are not an object,
a queue that is not an activity outbox queue, a message AMQP cannot encode) is marked dead at
once with its reason, counted and logged once, and the rest of its batch is published.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields, replace
from datetime import datetime
from typing import Any

from config.clock import utcnow
from config.errors import BrokerConnectionError
from config.records import json_fields
from config.settings import KickoffSettings
from models.activity import ActionStatus
from models.boundary import transaction
from models.db import release_connection
from models.outbox import OutboxStatus
from publisher.amqp import AmqpPublisher, publisher_from_settings
from publisher.outbox import OutboxRow, mark_dead, record_outcomes
from publisher.queues import TRIGGER_QUEUES
from publisher.sql import actions as action_sql
from publisher.sql import execute, fetch_all
from publisher.sql import outbox as outbox_sql
from publisher.trades import redeliver_trades, redeliverable_trades

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class DrainReport:
    """What one drain run did; ``broker_error`` says why it stopped early (broker unreachable)."""

    batches: int = 0
    published: int = 0
    failed: int = 0
    expired: int = 0
    released: int = 0
    cancelled: int = 0
    trades: int = 0  # pending (known unsent) trade claims republished and confirmed
    broker_error: str | None = None

    def __add__(self, other: DrainReport) -> DrainReport:
        counts = (
            getattr(self, f.name) + getattr(other, f.name) for f in fields(self) if f.name != "broker_error"
        )
        return DrainReport(*counts, broker_error=self.broker_error or other.broker_error)

    as_json = json_fields


def _skip_action(tracking_id: str, reason: str, *, now: datetime) -> None:
    """Mark an action skipped and release its key, so a fresh request can queue a new one."""
    execute(action_sql.FINISH_RELEASING_KEY, (ActionStatus.SKIPPED.value, reason, now, now, tracking_id))


def resolve_held_claims(*, now: datetime | None = None) -> tuple[int, int]:
    """Release chained claims whose IR move succeeded; cancel those whose parent failed or hold ran out.

    A parent still queued, delivered or running (including one whose publish is being retried,
    a transient failure) keeps the claim held until its hold_until. Returns (released, cancelled).
    """
    now = now or utcnow()
    released = cancelled = 0
    with transaction():
        rows = fetch_all(outbox_sql.SELECT_HELD_FOR_UPDATE)
        for outbox_id, tracking_id, hold_until, parent_status in rows:
            tracking_id = str(tracking_id)
            if parent_status == ActionStatus.SUCCEEDED.value:
                execute(outbox_sql.RELEASE_HOLD, (now, outbox_id))
                released += 1
                logger.info("chained claim released: tracking_id=%s", tracking_id)
                continue
            if parent_status in (None, ActionStatus.FAILED.value, ActionStatus.SKIPPED.value):
                reason = f"cancelled: parent IR move {parent_status or 'missing'}"
            elif hold_until is not None and now >= hold_until:
                reason = "cancelled: parent IR move did not finish within the hold"
            else:
                continue
            execute(outbox_sql.SET_STATUS, (OutboxStatus.CANCELLED.value, reason, outbox_id))
            _skip_action(tracking_id, reason, now=now)
            cancelled += 1
            logger.warning("chained claim %s: tracking_id=%s", reason, tracking_id)
    return released, cancelled


def _readable_rows(raw: Sequence[Sequence[Any]], *, now: datetime) -> list[OutboxRow]:
    """The claimed rows that can be published; each of the others is marked dead with its reason."""
    rows: list[OutboxRow] = []
    for r in raw:
        row_id, message_id, queue, tracking_id = r[0], str(r[1]), str(r[2]), r[5]
        tracking = None if tracking_id is None else str(tracking_id)
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


def drain_batch(
    *, publisher: AmqpPublisher, settings: KickoffSettings, limit: int | None = None
) -> tuple[int, int, int, int]:
    """Claim and publish one batch of due rows; returns (claimed, published, failed, expired).

    A row that can never be published is marked dead at once (see the module docstring) and
    counts as failed; the rest of the batch goes out.
    """
    now = utcnow()
    limit = limit or settings.outbox_batch_size
    with transaction():
        raw = fetch_all(outbox_sql.CLAIM_DUE, (now, limit))
        if not raw:
            return 0, 0, 0, 0
        rows = _readable_rows(raw, now=now)
        live: list[OutboxRow] = []
        expired: list[OutboxRow] = []
        for r in rows:
            (live if r.expires_at is None or r.expires_at > now else expired).append(r)
        if expired:
            execute(outbox_sql.EXPIRE, (OutboxStatus.EXPIRED.value, [r.id for r in expired]))
            for r in expired:
                if r.tracking_id:
                    _skip_action(r.tracking_id, "expired: the pick's deadline passed in the outbox", now=now)
                logger.warning("draft target expired in the outbox: tracking_id=%s", r.tracking_id)
        outcomes = publisher.publish_many([r.message() for r in live])
        published, failed = record_outcomes(live, outcomes, now=utcnow(), settings=settings)
    return len(raw), published, failed + len(raw) - len(rows), len(expired)


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
    deadline = time.monotonic() + (
        max_seconds if max_seconds is not None else settings.outbox_drain_max_seconds
    )
    released, cancelled = resolve_held_claims() if resolve_claims else (0, 0)
    report = DrainReport(released=released, cancelled=cancelled)
    while time.monotonic() < deadline:
        claimed, ok, bad, gone = drain_batch(publisher=publisher, settings=settings, limit=batch_size)
        if not claimed:
            break
        report += DrainReport(batches=1, published=ok, failed=bad, expired=gone)
        if bad and not ok:
            broker_error = _broker_unreachable(publisher)
            if broker_error is not None:
                logger.warning("outbox drain stopped: %s (%s rows failed)", broker_error, bad)
                report = replace(report, broker_error=broker_error)
                break
    if report.batches or released or cancelled:
        logger.info("outbox drain: %s", report.as_json())
    return report


def drain_outbox_concurrently(
    *,
    settings: KickoffSettings,
    workers: int | None = None,
    max_seconds: float | None = None,
    batch_size: int | None = None,
    publisher_factory: Callable[[], AmqpPublisher] | None = None,
) -> DrainReport:
    """Resolve held claims and republish pending (known unsent) trade claims once, then run
    ``workers`` drains side by side (OUTBOX_DRAIN_WORKERS).

    Each drain has its own AMQP connection (``publisher_factory``, default: AMQP_URL) and its own
    database connection; ``FOR UPDATE SKIP LOCKED`` keeps their batches apart, so a row is still
    published by one drain only. The drains take turns to write a batch (``AmqpLink.send_turn``):
    one writes while the others await their confirms, mark their rows and claim the next batch.
    """
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
        logger.info("outbox drain (%d workers): %s", workers, total.as_json())
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
        return execute(outbox_sql.PULL_BACKOFF_IN, (now, now))
