"""The drain handles each outbox row on its own: rows that can never be published first, good rows after."""

from __future__ import annotations

import logging
import uuid

import pytest

from config.clock import utcnow
from config.set_aside import set_aside_count
from models.activity import ActionStatus
from models.db import database
from publisher.actions import get_action
from publisher.amqp import AmqpPublisher, OutgoingMessage
from publisher.drain import drain_outbox
from publisher.errors import MissingQueueError
from publisher.outbox import insert_row, outbox_report
from publisher.queues import LINEUP_UPDATES
from publisher.triggers import TriggerStatus, trigger_lineup
from tests.publisher.helpers import lineup, outbox_row

DOWN_URL = "amqp://guest:guest@127.0.0.1:1/%2F"


def _row(queue: str = LINEUP_UPDATES, headers: dict | None = None) -> str:
    message_id = str(uuid.uuid4())
    with database.atomic():
        insert_row(
            message=OutgoingMessage(
                queue=queue, body={"good": True}, message_id=message_id, headers=headers or {}
            ),
            tracking_id=None,
            next_attempt_at=utcnow(),
        )
    return message_id


def test_rows_that_can_never_be_published_come_first_and_are_set_aside_while_the_rest_go_out(
    db, fresh_queues, publisher, pub_settings, amqp_vhost, read_queue, caplog
):
    down = AmqpPublisher(url=DOWN_URL, connect_timeout=1)
    pending = trigger_lineup(lineup(), publisher=down, settings=pub_settings)
    assert pending.status is TriggerStatus.PENDING
    database.execute_sql(  # a header AMQP has no type for (a float), on a row with an action, due now
        "UPDATE outbox_messages SET headers = '{\"x-weight\": 1.5}', "
        "next_attempt_at = next_attempt_at - interval '1 second' WHERE tracking_id = %s",
        (pending.tracking_id,),
    )
    _row(headers={"x-big": 10**30})  # beyond AMQP's 64-bit integers
    _row(queue="lineup_updatez")  # not an activity outbox queue
    _row()
    database.execute_sql(  # headers that are not an object (written by hand or by an older version)
        "UPDATE outbox_messages SET headers = '[1]' WHERE id = (SELECT max(id) FROM outbox_messages)"
    )
    good = [_row() for _ in range(3)]
    kinds = ("unencodable", "unknown_queue", "unreadable")
    before = {kind: set_aside_count("activity_outbox", kind) for kind in kinds}

    with caplog.at_level(logging.INFO, logger="config.set_aside"):
        report = drain_outbox(publisher=publisher, settings=pub_settings)

    assert report.published == 3 and report.failed == 4 and report.broker_error is None
    lines = [r for r in caplog.records if r.getMessage().startswith("activity_outbox: outbox row")]
    assert len(lines) == 4 and {r.levelno for r in lines} == {logging.ERROR}  # dead: lost without an operator
    assert sorted(p.message_id for _, p in read_queue(LINEUP_UPDATES)) == sorted(good)
    dead = dict(
        database.execute_sql(
            "SELECT queue || ':' || id, last_error FROM outbox_messages WHERE status = 'dead'"
        )
    )
    assert len(dead) == 4 and outbox_report().backlog == 0
    errors = sorted(dead.values())
    assert sum("cannot be encoded" in e for e in errors) == 2
    assert sum("is not an activity outbox queue" in e for e in errors) == 1
    assert sum("headers are not a JSON object" in e for e in errors) == 1
    assert {kind: set_aside_count("activity_outbox", kind) - before[kind] for kind in kinds} == {
        "unencodable": 2,
        "unknown_queue": 1,
        "unreadable": 1,
    }
    assert outbox_row(pending.tracking_id)["attempts"] == 1  # dead at once, not after OUTBOX_MAX_ATTEMPTS
    action = get_action(pending.tracking_id)
    assert action.status == ActionStatus.FAILED and "cannot be encoded" in action.error
    with pytest.raises(MissingQueueError):  # the unknown queue was never declared on the broker
        read_queue("lineup_updatez")
    assert drain_outbox(publisher=publisher, settings=pub_settings).batches == 0  # not tried again
