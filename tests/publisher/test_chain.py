"""Chained claims behind an IR move: one case per row of the spec's table."""

from __future__ import annotations

import psycopg2
import pytest

from models.activity import ActionStatus
from models.db import connect_kwargs_from_url
from publisher.actions import get_action, record_result
from publisher.amqp import AmqpPublisher
from publisher.drain import drain_outbox
from publisher.errors import TriggerUnavailableError, TriggerValidationError
from publisher.triggers import TriggerStatus, trigger_lineup, trigger_waiver
from tests.publisher.helpers import action, count, ir_move, lineup, outbox_row, waiver


def _claim(after: str, **kw):
    kw.setdefault("drop_player_id", None)
    return waiver(after_tracking_id=after, **kw)


def test_row_caller_order_the_claim_waits_for_the_ir_move_then_publishes_without_after_tracking_id(
    publisher, pub_settings, read_queue
):
    parent = trigger_lineup(ir_move(), publisher=publisher, settings=pub_settings)
    claim = trigger_waiver(_claim(parent.tracking_id), publisher=publisher, settings=pub_settings)
    assert claim.status is TriggerStatus.PENDING and claim.held and not claim.published
    drain_outbox(publisher=publisher, settings=pub_settings)
    assert read_queue("waiver_actions") == []
    record_result(parent.tracking_id, ActionStatus.SUCCEEDED)
    report = drain_outbox(publisher=publisher, settings=pub_settings)
    assert report.released == 1 and report.published == 1
    [(body, _)] = read_queue("waiver_actions")
    assert body["tracking_id"] == claim.tracking_id
    assert "after_tracking_id" not in body and body["drop_player_id"] is None


@pytest.mark.parametrize(
    ("make_parent", "claim_kw", "field"),
    [
        pytest.param(ir_move, {"drop_player_id": 3916387}, "drop_player_id", id="claim-must-omit-drop"),
        pytest.param(None, {}, "after_tracking_id", id="parent-must-exist"),
        pytest.param(ir_move, {"team": "8"}, "after_tracking_id", id="parent-same-team"),
        pytest.param(lineup, {}, "after_tracking_id", id="parent-has-ir-entry"),
        pytest.param("failed", {}, "after_tracking_id", id="parent-not-failed"),
    ],
)
def test_row_requirements_refuse_the_claim_and_queue_nothing(
    publisher, pub_settings, make_parent, claim_kw, field
):
    after = "6f1c1b1e-0000-4000-8000-000000000000"
    if make_parent is not None:
        request = ir_move() if make_parent == "failed" else make_parent(idempotency_key=None)
        after = trigger_lineup(request, publisher=publisher, settings=pub_settings).tracking_id
        if make_parent == "failed":
            record_result(after, ActionStatus.FAILED)
    before = count("activity_actions")
    with pytest.raises(TriggerValidationError) as info:
        trigger_waiver(_claim(after, **claim_kw), publisher=publisher, settings=pub_settings)
    assert info.value.field == field
    assert count("activity_actions") == before


def test_row_hold_length_is_activity_dependency_hold_seconds(publisher, pub_settings, frozen_clock):
    assert type(pub_settings).model_fields["activity_dependency_hold_seconds"].default == 3600
    parent = trigger_lineup(ir_move(), publisher=publisher, settings=pub_settings)
    claim = trigger_waiver(_claim(parent.tracking_id), publisher=publisher, settings=pub_settings)
    assert (get_action(claim.tracking_id).hold_until - frozen_clock.now).total_seconds() == 3600
    frozen_clock.advance(seconds=3599)
    assert drain_outbox(publisher=publisher, settings=pub_settings).cancelled == 0
    frozen_clock.advance(seconds=1)
    assert drain_outbox(publisher=publisher, settings=pub_settings).cancelled == 1
    assert get_action(claim.tracking_id).status == ActionStatus.SKIPPED


def test_row_failure_a_cancelled_claim_is_skipped_and_its_key_released_for_a_fresh_ir_move(
    publisher, pub_settings, read_queue
):
    parent = trigger_lineup(ir_move(), publisher=publisher, settings=pub_settings)
    claim = trigger_waiver(_claim(parent.tracking_id), publisher=publisher, settings=pub_settings)
    record_result(parent.tracking_id, ActionStatus.FAILED)
    assert drain_outbox(publisher=publisher, settings=pub_settings).cancelled == 1
    row = action(claim.tracking_id)
    assert row["status"] == "skipped" and row["idempotency_key"] is None and row["released_key"]
    assert outbox_row(claim.tracking_id)["status"] == "cancelled"
    fresh_parent = trigger_lineup(ir_move(), publisher=publisher, settings=pub_settings)
    again = trigger_waiver(_claim(fresh_parent.tracking_id), publisher=publisher, settings=pub_settings)
    assert again.status is TriggerStatus.PENDING and again.held and again.tracking_id != claim.tracking_id
    assert [b for b, _ in read_queue("waiver_actions")] == []


def test_row_transient_parent_failure_keeps_the_claim_held(db, fresh_queues, pub_settings, amqp_vhost):
    down = AmqpPublisher(url="amqp://guest:guest@127.0.0.1:1/%2F", connect_timeout=1)
    parent = trigger_lineup(ir_move(), publisher=down, settings=pub_settings)
    assert outbox_row(parent.tracking_id)["last_error"]  # the IR move's delivery failed, will be retried
    claim = trigger_waiver(_claim(parent.tracking_id), publisher=down, settings=pub_settings)
    report = drain_outbox(publisher=down, settings=pub_settings, max_seconds=2)
    assert report.cancelled == 0
    assert get_action(claim.tracking_id).status == ActionStatus.QUEUED
    assert outbox_row(claim.tracking_id)["held_by"] is not None


def test_row_unreadable_parent_is_retryable_and_queues_nothing(publisher, pub_settings, settings):
    parent = trigger_lineup(ir_move(), publisher=publisher, settings=pub_settings)
    name, kwargs = connect_kwargs_from_url(settings.database_url)
    other = psycopg2.connect(dbname=name, **kwargs)
    try:
        with other.cursor() as cur:  # a writer holds the parent row
            cur.execute(
                "SELECT 1 FROM activity_actions WHERE tracking_id = %s FOR UPDATE", (parent.tracking_id,)
            )
            with pytest.raises(TriggerUnavailableError) as info:
                trigger_waiver(_claim(parent.tracking_id), publisher=publisher, settings=pub_settings)
        assert info.value.retryable
    finally:
        other.rollback()
        other.close()
    assert count("activity_actions") == 1 and count("outbox_messages") == 1
