"""The periodic drain actor: wired to the default queue, scheduled every minute, drains the outbox."""

from __future__ import annotations

import uuid

from config.clock import utcnow
from models.db import database
from publisher.amqp import OutgoingMessage
from publisher.outbox import insert_row


def test_the_drain_actor_publishes_due_rows(publisher, pub_settings, read_queue, actor_runtime):
    import actors.outbox
    from scheduler.table import PERIODIC

    actor_runtime(pub_settings)
    with database.atomic():
        message = OutgoingMessage(queue="draft_targets", body={"x": 1}, message_id=str(uuid.uuid4()))
        insert_row(message=message, tracking_id=None, next_attempt_at=utcnow())
    assert actors.outbox.drain_outbox.queue_name == "default"
    [entry] = [e for e in PERIODIC if e.actor == "drain_outbox"]
    assert entry.cron == "* * * * *" and len(entry.envs) == 3
    assert actors.outbox.drain_outbox.fn()["published"] == 1
    assert len(read_queue("draft_targets")) == 1
