"""The drain runner: batches, backoff, dead rows, missing queues, concurrent drains, crash before mark."""

from __future__ import annotations

import time
import uuid
from datetime import timedelta
from typing import Any

import pytest

from config.clock import utcnow
from models.activity import ActionStatus
from models.db import database
from publisher import drain as drain_module
from publisher.actions import get_action
from publisher.amqp import AmqpPublisher, OutgoingMessage
from publisher.drain import drain_outbox, drain_outbox_concurrently
from publisher.outbox import backoff_delay, insert_row, outbox_report, retry_dead
from publisher.queues import LINEUP_UPDATES, WAIVER_ACTIONS
from publisher.triggers import TriggerStatus, trigger_lineup
from tests.publisher.helpers import count, due_rows, lineup, never_confirming, reject_all


def _one_row_unconfirmed(
    amqp_vhost: str, pub_settings: Any, monkeypatch: pytest.MonkeyPatch, *, confirm_timeout: float
) -> tuple[AmqpPublisher, Any]:
    """One due row, a publisher whose confirms never come, and settings that retry a row after a minute."""
    due_rows(1)
    silent = never_confirming(AmqpPublisher(url=amqp_vhost, confirm_timeout=confirm_timeout), monkeypatch)
    no_retry_yet = pub_settings.model_copy(
        update={"outbox_backoff_base_seconds": 60.0, "outbox_backoff_max_seconds": 60.0}
    )
    return silent, no_retry_yet


def test_due_rows_are_published_in_batches_and_marked_published(publisher, pub_settings, read_queue):
    ids = due_rows(1200)
    report = drain_outbox(publisher=publisher, settings=pub_settings, batch_size=500)
    assert report.batches == 3 and report.published == 1200
    assert count("outbox_messages", "status = 'published' AND published_at IS NOT NULL") == 1200
    assert sorted(p.message_id for _, p in read_queue(LINEUP_UPDATES)) == sorted(ids)


def test_backoff_doubles_per_attempt_up_to_the_maximum(settings):
    s = settings.model_copy(update={"outbox_backoff_base_seconds": 5, "outbox_backoff_max_seconds": 30})
    assert [backoff_delay(n, s).total_seconds() for n in range(1, 6)] == [5, 10, 20, 30, 30]


def test_an_unreachable_broker_never_uses_up_attempts_however_long_it_lasts(
    db, fresh_queues, pub_settings, frozen_clock
):
    due_rows(1)
    down = AmqpPublisher(url="amqp://guest:guest@127.0.0.1:1/%2F", connect_timeout=1)
    tries = pub_settings.outbox_max_attempts * 3
    for _ in range(tries):
        assert drain_outbox(publisher=down, settings=pub_settings).failed == 1
        frozen_clock.advance(seconds=1)
    report = outbox_report()
    assert report.dead == 0 and report.backlog == 1
    [row] = report.oldest_pending
    assert row.attempts == 0 and row.tries == tries and "AMQP_URL" in row.last_error
    # the backoff doubles per try and stops at the cap
    assert row.next_attempt_at - (frozen_clock.now - timedelta(seconds=1)) == timedelta(
        seconds=pub_settings.outbox_backoff_max_seconds
    )


def test_a_batch_failed_by_an_outage_is_recorded_in_one_statement_with_each_rows_backoff(
    db, fresh_queues, pub_settings, frozen_clock, caplog
):
    due_rows(4)
    database.execute_sql("UPDATE outbox_messages SET tries = id - 1")  # tries 0, 1, 2, 3
    down = AmqpPublisher(url="amqp://guest:guest@127.0.0.1:1/%2F", connect_timeout=1)
    with caplog.at_level("WARNING", logger="publisher.outbox"):
        assert drain_outbox(publisher=down, settings=pub_settings).failed == 4
    rows = database.execute_sql(
        "SELECT tries, attempts, status, next_attempt_at FROM outbox_messages ORDER BY id"
    ).fetchall()
    assert (
        [r[0] for r in rows] == [1, 2, 3, 4]
        and {r[1] for r in rows} == {0}
        and {r[2] for r in rows} == {"pending"}
    )
    assert [r[3] - frozen_clock.now for r in rows] == [backoff_delay(n, pub_settings) for n in (1, 2, 3, 4)]
    assert (
        sum(  # one line for the batch, not one per row
            "rows failed, they stay pending" in r.message for r in caplog.records
        )
        == 1
    )


def test_a_confirm_that_never_comes_never_uses_up_attempts(
    db, fresh_queues, amqp_vhost, pub_settings, monkeypatch
):
    silent, one_try_per_run = _one_row_unconfirmed(amqp_vhost, pub_settings, monkeypatch, confirm_timeout=0.3)
    for _ in range(pub_settings.outbox_max_attempts + 2):
        database.execute_sql("UPDATE outbox_messages SET next_attempt_at = now() - interval '1 second'")
        assert drain_outbox(publisher=silent, settings=one_try_per_run).failed == 1
    silent.close()
    [(status, attempts, tries)] = database.execute_sql(
        "SELECT status, attempts, tries FROM outbox_messages"
    ).fetchall()
    assert status == "pending" and attempts == 0 and tries == pub_settings.outbox_max_attempts + 2


def test_a_message_the_broker_keeps_refusing_is_dead_after_the_maximum_and_its_action_failed(
    publisher, pub_settings, amqp_vhost, frozen_clock
):
    reject_all(amqp_vhost, LINEUP_UPDATES)
    result = trigger_lineup(lineup(), publisher=publisher, settings=pub_settings)
    assert not result.published
    for _ in range(pub_settings.outbox_max_attempts - 1):
        frozen_clock.advance(seconds=1)
        drain_outbox(publisher=publisher, settings=pub_settings)
    report = outbox_report()
    assert report.dead == 1 and report.backlog == 0
    assert report.dead_rows[0].attempts == pub_settings.outbox_max_attempts
    assert "nacked" in report.dead_rows[0].last_error
    assert get_action(result.tracking_id).status == ActionStatus.FAILED


def test_retry_dead_restores_the_action_to_queued_so_delivery_marks_it_and_its_key_stays_held(
    publisher, pub_settings, amqp_vhost, frozen_clock, read_queue
):
    reject_all(amqp_vhost, LINEUP_UPDATES)
    result = trigger_lineup(lineup(), publisher=publisher, settings=pub_settings)
    for _ in range(pub_settings.outbox_max_attempts - 1):
        frozen_clock.advance(seconds=1)
        drain_outbox(publisher=publisher, settings=pub_settings)
    assert get_action(result.tracking_id).status == ActionStatus.FAILED
    publisher.delete_queue(LINEUP_UPDATES)  # the operator fixes the cause
    publisher.declare_durable([LINEUP_UPDATES])

    report = retry_dead()
    assert report.as_json() == {"rows": 1, "actions": 1, "superseded": 0}
    assert get_action(result.tracking_id).status == ActionStatus.QUEUED
    assert drain_outbox(publisher=publisher, settings=pub_settings).published == 1
    assert get_action(result.tracking_id).status == ActionStatus.DELIVERED
    [(body, _)] = read_queue(LINEUP_UPDATES)
    assert body["tracking_id"] == result.tracking_id
    frozen_clock.advance(days=2)  # far past the key's TTL: a delivered action keeps it
    again = trigger_lineup(lineup(), publisher=publisher, settings=pub_settings)
    assert again.status is TriggerStatus.DUPLICATE and again.tracking_id == result.tracking_id


def test_retry_dead_leaves_a_row_dead_when_a_newer_action_took_its_released_key(
    publisher, pub_settings, amqp_vhost, frozen_clock
):
    reject_all(amqp_vhost, LINEUP_UPDATES)
    first = trigger_lineup(lineup(), publisher=publisher, settings=pub_settings)
    for _ in range(pub_settings.outbox_max_attempts - 1):
        frozen_clock.advance(seconds=1)
        drain_outbox(publisher=publisher, settings=pub_settings)
    frozen_clock.advance(days=1)  # the failed action's key is released after its TTL
    second = trigger_lineup(lineup(), publisher=publisher, settings=pub_settings)
    assert second.tracking_id != first.tracking_id
    assert retry_dead().as_json() == {"rows": 0, "actions": 0, "superseded": 1}
    assert get_action(first.tracking_id).status == ActionStatus.FAILED
    assert outbox_report().dead == 1


def test_a_missing_queue_leaves_the_row_pending_with_an_error_naming_the_queue(
    publisher, pub_settings, frozen_clock
):
    publisher.delete_queue(WAIVER_ACTIONS)
    due_rows(2, WAIVER_ACTIONS)
    due_rows(1, LINEUP_UPDATES)
    report = drain_outbox(publisher=publisher, settings=pub_settings)
    assert report.published == 1 and report.failed == 2
    rows = database.execute_sql(
        "SELECT status, attempts, last_error FROM outbox_messages WHERE queue = %s", (WAIVER_ACTIONS,)
    ).fetchall()
    assert all(r[0] == "pending" and r[1] == 0 and "waiver_actions" in r[2] for r in rows)
    publisher.declare_durable([WAIVER_ACTIONS])
    frozen_clock.advance(seconds=10)
    assert drain_outbox(publisher=publisher, settings=pub_settings).published == 2


def test_status_reports_backlog_and_the_oldest_pending_age(db, pub_settings, frozen_clock):
    due_rows(3)
    frozen_clock.advance(seconds=90)
    report = outbox_report()
    assert report.backlog == 3 and report.oldest_pending_age_seconds == pytest.approx(90)
    assert report.backlog_by_queue == {LINEUP_UPDATES: 3}


def test_two_drains_at_once_never_publish_a_row_twice(publisher, pub_settings, amqp_vhost, read_queue):
    due_rows(3000)
    made: list[AmqpPublisher] = []

    def own_publisher() -> AmqpPublisher:
        made.append(AmqpPublisher(url=amqp_vhost))
        return made[-1]

    report = drain_outbox_concurrently(
        settings=pub_settings, workers=2, batch_size=200, publisher_factory=own_publisher
    )
    assert report.published == 3000 and report.failed == 0
    assert len(made) == 2
    ids = [p.message_id for _, p in read_queue(LINEUP_UPDATES)]
    assert len(ids) == len(set(ids)) == 3000


def test_a_crash_between_publish_and_mark_republishes_with_the_same_message_id(
    publisher, pub_settings, read_queue, monkeypatch
):
    [message_id] = due_rows(1)

    def crash(*args, **kwargs):
        raise SystemExit("killed between publish and mark")

    monkeypatch.setattr(drain_module, "record_outcomes", crash)
    with pytest.raises(SystemExit):
        drain_outbox(publisher=publisher, settings=pub_settings)
    monkeypatch.undo()
    assert count("outbox_messages", "status = 'pending'") == 1  # the mark was rolled back
    assert drain_outbox(publisher=publisher, settings=pub_settings).published == 1
    ids = [p.message_id for _, p in read_queue(LINEUP_UPDATES)]
    assert ids == [message_id, message_id]  # a consumer drops the second by message id


def test_a_fresh_trigger_row_is_left_to_the_trigger_during_the_grace(
    db, fresh_queues, pub_settings, publisher, read_queue, monkeypatch
):
    from publisher import trigger_saves as saves_module

    settings = pub_settings.model_copy(update={"outbox_immediate_grace_seconds": 30.0})
    drained_in_the_window: list[int] = []
    real_publish = saves_module.publish_rows_now

    def a_drain_runs_between_save_and_publish(outbox_ids, **kw):
        drained_in_the_window.append(drain_outbox(publisher=publisher, settings=settings).published)
        return real_publish(outbox_ids, **kw)

    monkeypatch.setattr(saves_module, "publish_rows_now", a_drain_runs_between_save_and_publish)
    result = trigger_lineup(lineup(), publisher=publisher, settings=settings)
    assert drained_in_the_window == [0]  # the trigger saved its row inside the grace
    assert result.status is TriggerStatus.QUEUED  # and published it itself
    assert len(read_queue(LINEUP_UPDATES)) == 1


def test_a_batch_the_broker_never_confirms_stays_pending_after_the_confirm_timeout(
    db, fresh_queues, amqp_vhost, pub_settings, monkeypatch
):
    silent, no_retry_yet = _one_row_unconfirmed(amqp_vhost, pub_settings, monkeypatch, confirm_timeout=1.0)
    started = time.monotonic()
    report = drain_outbox(publisher=silent, settings=no_retry_yet)
    assert time.monotonic() - started < 3.0
    assert report.published == 0 and report.failed == 1
    [(status, published_at, last_error)] = database.execute_sql(
        "SELECT status, published_at, last_error FROM outbox_messages"
    ).fetchall()
    assert status == "pending" and published_at is None and "not confirmed" in last_error
    silent.close()


def test_the_caller_hands_its_connection_back_before_its_drains_start(
    db, fresh_queues, pub_settings, read_queue
):
    """A drain thread runs in a process pool of one connection: the calling thread (which read the
    held claims) does not keep its connection while it waits for its drains."""
    from models.db import init_database

    for _ in range(4):
        message = OutgoingMessage(queue=LINEUP_UPDATES, body={"x": 1}, message_id=str(uuid.uuid4()))
        with database.atomic():
            insert_row(message=message, tracking_id=None, next_attempt_at=utcnow())
    database.close()
    init_database(pub_settings.database_url, connect_timeout_seconds=2, pool_max_connections=1)
    try:
        report = drain_outbox_concurrently(
            settings=pub_settings,
            workers=1,
            publisher_factory=lambda: AmqpPublisher(url=pub_settings.amqp_url, confirm_timeout=5.0),
        )
    finally:
        database.close()
        init_database(pub_settings.database_url)
    assert report.published == 4
    assert len(read_queue(LINEUP_UPDATES)) == 4
