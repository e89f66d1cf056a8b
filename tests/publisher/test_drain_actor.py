"""The periodic drain actor: wired to the default queue, scheduled every minute, drains the outbox."""

from __future__ import annotations

import uuid

from config.clock import utcnow
from config.settings import KickoffSettings, MatchListenerEnvironment
from models.db import database
from publisher.amqp import OutgoingMessage
from publisher.outbox import insert_row


def _worker_settings(pub_settings: KickoffSettings) -> MatchListenerEnvironment:
    """A worker process's settings (its actors include the listeners'), the publisher's as they are."""
    return MatchListenerEnvironment(_env_file=None, **pub_settings.model_dump())


def test_the_drain_actor_publishes_due_rows(publisher, pub_settings, read_queue, actor_runtime):
    import actors.outbox
    from scheduler.table import PERIODIC

    actor_runtime(_worker_settings(pub_settings))
    with database.atomic():
        message = OutgoingMessage(queue="draft_targets", body={"x": 1}, message_id=str(uuid.uuid4()))
        insert_row(message=message, tracking_id=None, next_attempt_at=utcnow())
    assert actors.outbox.drain_outbox.queue_name == "default"
    [entry] = [e for e in PERIODIC if e.actor == "drain_outbox"]
    assert entry.cron == "* * * * *" and len(entry.envs) == 3
    assert actors.outbox.drain_outbox.fn()["published"] == 1
    assert len(read_queue("draft_targets")) == 1


def test_the_verify_actor_settles_a_reported_result_every_minute_in_every_app_env(
    publisher, pub_settings, actor_runtime
):
    import actors.outbox
    from publisher.results import action_state, report_result
    from publisher.triggers import trigger_lineup
    from scheduler.table import PERIODIC
    from tests.publisher.helpers import lineup

    actor_runtime(_worker_settings(pub_settings))
    tracking_id = trigger_lineup(lineup(), publisher=publisher, settings=pub_settings).tracking_id
    report_result(tracking_id, outcome="succeeded", details={"team_id": "7"}, reported_by="worker")
    assert actors.outbox.verify_action_results.queue_name == "default"
    [entry] = [e for e in PERIODIC if e.actor == "verify_action_results"]
    assert entry.cron == "* * * * *" and len(entry.envs) == 3
    out = actors.outbox.verify_action_results.fn()
    assert out["verified"] == [tracking_id]
    assert action_state(tracking_id)["verification"]["status"] == "verified"
