"""Triggers: validation first, action + outbox row in one transaction, publish at once, draft rules."""

from __future__ import annotations

import time
from datetime import timedelta

import pytest

from config.clock import utcnow
from models.activity import ActionStatus
from publisher.actions import get_action, record_result
from publisher.amqp import AmqpPublisher
from publisher.drain import drain_outbox
from publisher.errors import TriggerConflictError, TriggerUnavailableError, TriggerValidationError
from publisher.run_context import bound_run_id
from publisher.triggers import TriggerStatus, trigger_draft_pick, trigger_lineup, trigger_waiver
from tests.publisher.helpers import TRACEPARENT, action, count, draft, lineup, outbox_row, waiver
from tests.waiting import wait_for

DOWN_URL = "amqp://guest:guest@127.0.0.1:1/%2F"


SENDERS = {
    "lineup": (trigger_lineup, lineup),
    "waiver": (trigger_waiver, waiver),
    "draft": (trigger_draft_pick, draft),
}


@pytest.mark.parametrize(
    ("kind", "fields", "field"),
    [
        pytest.param(
            "lineup",
            {"swaps": [{"player_id": "4046", "to_slot": "BE"}]},
            "swaps[0].player_id",
            id="lineup-swap-player-sleeper-id",
        ),
        pytest.param("waiver", {"add_player_id": "4046"}, "add_player_id", id="waiver-add-sleeper-id"),
        pytest.param("waiver", {"drop_player_id": "DAL"}, "drop_player_id", id="waiver-drop-sleeper-id"),
        pytest.param("draft", {"espn_id": "6794"}, "espn_id", id="draft-sleeper-id"),
        pytest.param("lineup", {"traceparent": "not-a-trace"}, "traceparent", id="lineup-bad-traceparent"),
        pytest.param("lineup", {"swaps": []}, "swaps", id="lineup-no-swaps"),
    ],
)
def test_a_refused_request_names_the_field_and_queues_nothing(
    publisher, pub_settings, read_queue, kind, fields, field
):
    send, build = SENDERS[kind]
    with pytest.raises(TriggerValidationError) as info:
        send(build(**fields), publisher=publisher, settings=pub_settings)
    assert info.value.field == field
    assert count("activity_actions") == 0 and count("outbox_messages") == 0


def test_a_lineup_trigger_saves_action_and_message_and_publishes_at_once(publisher, pub_settings, read_queue):
    request = lineup(
        swaps=[{"player_id": 3139477, "to_slot": "BE", "kind": "lineup"}],
        decision_inputs={"season": 2024, "week": 3, "projection": 12.5},
        traceparent=TRACEPARENT,
    )
    result = trigger_lineup(request, publisher=publisher, settings=pub_settings)
    assert result.status is TriggerStatus.QUEUED and result.published
    assert action(result.tracking_id)["status"] == ActionStatus.DELIVERED
    row = outbox_row(result.tracking_id)
    assert row["status"] == "published" and row["published_at"] is not None
    [(body, props)] = read_queue("lineup_updates")
    assert body["tracking_id"] == result.tracking_id
    assert body["swaps"] == [{"player_id": 3139477, "to_slot": "BE"}]  # swap kind stripped
    assert "decision_inputs" not in body
    assert body["traceparent"] == TRACEPARENT and props.headers == {"traceparent": TRACEPARENT}
    assert props.message_id == str(row["message_id"])


@pytest.mark.parametrize("up", [True, False], ids=["broker-up", "broker-down"])
def test_a_traced_trigger_records_its_immediate_publish_in_its_own_span_and_its_message_names_that_span(
    db, fresh_queues, pub_settings, amqp_vhost, read_queue, traced, up
):
    sender = AmqpPublisher(url=amqp_vhost if up else DOWN_URL, connect_timeout=1, confirm_timeout=5.0)
    try:
        result = trigger_lineup(lineup(traceparent=TRACEPARENT), publisher=sender, settings=pub_settings)
    finally:
        sender.close()
    [trigger] = traced.get_finished_spans()  # no publish span beside it: the trigger's span records it
    assert trigger.name == "lineup_updates trigger"
    assert format(trigger.parent.span_id, "016x") == TRACEPARENT.split("-")[2]
    assert trigger.attributes["kickoff.tracking_id"] == result.tracking_id
    assert trigger.attributes["kickoff.status"] == ("queued" if up else "pending")
    failures = [e for e in trigger.events if e.name == "publish failed"]
    assert bool(failures) is not up and all(e.attributes["error"] for e in failures)
    names_it = f"00-{format(trigger.context.trace_id, '032x')}-{format(trigger.context.span_id, '016x')}-01"
    if not up:  # the drain publishes the saved row once its (test-sized) backoff is over
        with AmqpPublisher(url=amqp_vhost) as drainer:
            wait_for(
                lambda: drain_outbox(publisher=drainer, settings=pub_settings).published == 1,
                timeout=30,
                what="the drain to publish the row",
            )
    [(body, props)] = read_queue("lineup_updates")
    assert body["traceparent"] == TRACEPARENT  # the caller's, in the body; the header names the hop
    if up:
        assert props.headers == {"traceparent": names_it}
    else:  # published by the drain, in a publish span whose parent is the trigger's span
        [publish] = [s for s in traced.get_finished_spans() if s.name == "lineup_updates publish"]
        assert publish.parent.span_id == trigger.context.span_id
        assert props.headers["traceparent"] == names_it[:36] + format(publish.context.span_id, "016x") + "-01"


def test_with_the_broker_down_the_trigger_answers_pending_and_the_drain_delivers_later(
    db, fresh_queues, pub_settings, amqp_vhost, read_queue
):
    down = AmqpPublisher(url=DOWN_URL, connect_timeout=1)
    result = trigger_waiver(waiver(), publisher=down, settings=pub_settings)
    assert result.status is TriggerStatus.PENDING and not result.published
    assert result.as_json() == {
        "status": "pending",
        "tracking_id": result.tracking_id,
        "published": False,
        "held": False,
    }
    row = outbox_row(result.tracking_id)
    assert row["status"] == "pending" and row["attempts"] == 0 and row["tries"] == 1
    assert "AMQP_URL" in row["last_error"]
    again = trigger_waiver(waiver(), publisher=down, settings=pub_settings)
    assert again.status is TriggerStatus.DUPLICATE and not again.published
    time.sleep(0.1)  # past the row's (test-sized) backoff
    with AmqpPublisher(url=amqp_vhost) as up:
        report = drain_outbox(publisher=up, settings=pub_settings)
    assert report.published == 1
    [(body, _)] = read_queue("waiver_actions")
    assert body["tracking_id"] == result.tracking_id
    assert get_action(result.tracking_id).status == ActionStatus.DELIVERED
    with AmqpPublisher(url=amqp_vhost) as up:
        after = trigger_waiver(waiver(), publisher=up, settings=pub_settings)
    assert after.status is TriggerStatus.DUPLICATE and after.published


def test_a_trigger_inside_a_run_scope_links_the_action_to_the_run(publisher, pub_settings):
    with bound_run_id("run-42"):
        result = trigger_lineup(lineup(), publisher=publisher, settings=pub_settings)
    assert get_action(result.tracking_id).run_id == "run-42"


def test_a_filled_pick_is_a_conflict(publisher, pub_settings):
    first = trigger_draft_pick(draft(), publisher=publisher, settings=pub_settings)
    record_result(first.tracking_id, ActionStatus.SUCCEEDED)
    with pytest.raises(TriggerConflictError, match="filled"):
        trigger_draft_pick(draft(espn_id=3918298), publisher=publisher, settings=pub_settings)


def test_a_same_key_repeat_after_its_own_target_filled_the_pick_is_a_duplicate_with_the_original_id(
    publisher, pub_settings
):
    """The key lookup comes before the filled check: the repeat is answered by its key."""
    first = trigger_draft_pick(draft(), publisher=publisher, settings=pub_settings)
    record_result(first.tracking_id, ActionStatus.SUCCEEDED)
    again = trigger_draft_pick(draft(), publisher=publisher, settings=pub_settings)
    assert again.status is TriggerStatus.DUPLICATE and again.tracking_id == first.tracking_id
    assert count("activity_actions") == 1


def test_a_same_key_repeat_past_its_expires_at_is_a_duplicate_of_the_delivered_target(
    publisher, pub_settings, frozen_clock
):
    """The key lookup comes before the expired check too."""
    expires_at = utcnow() + timedelta(minutes=2)
    first = trigger_draft_pick(draft(expires_at=expires_at), publisher=publisher, settings=pub_settings)
    record_result(first.tracking_id, ActionStatus.SUCCEEDED)
    frozen_clock.advance(minutes=3)
    again = trigger_draft_pick(draft(expires_at=expires_at), publisher=publisher, settings=pub_settings)
    assert again.status is TriggerStatus.DUPLICATE and again.tracking_id == first.tracking_id


def test_an_expired_pick_is_a_conflict_and_queues_nothing(publisher, pub_settings):
    with pytest.raises(TriggerConflictError, match="expired"):
        trigger_draft_pick(
            draft(expires_at=utcnow() - timedelta(seconds=1)), publisher=publisher, settings=pub_settings
        )
    assert count("activity_actions") == 0


def test_an_undelivered_draft_pick_is_unavailable_and_a_retry_with_the_same_key_delivers_it_at_once(
    db, fresh_queues, pub_settings, amqp_vhost, read_queue
):
    slow_drain = pub_settings.model_copy(update={"outbox_backoff_base_seconds": 600.0})
    down = AmqpPublisher(url=DOWN_URL, connect_timeout=1)
    with pytest.raises(TriggerUnavailableError) as info:
        trigger_draft_pick(draft(), publisher=down, settings=slow_drain)
    tracking_id = info.value.tracking_id
    assert info.value.retryable and tracking_id
    with pytest.raises(TriggerUnavailableError) as again:  # still down: the same answer, same action
        trigger_draft_pick(draft(), publisher=down, settings=slow_drain)
    assert again.value.tracking_id == tracking_id
    assert outbox_row(tracking_id)["tries"] == 2

    with AmqpPublisher(url=amqp_vhost) as up:  # back: the retry publishes the saved target now
        retry = trigger_draft_pick(draft(), publisher=up, settings=slow_drain)
        assert retry.status is TriggerStatus.QUEUED and retry.published and retry.tracking_id == tracking_id
        assert get_action(tracking_id).status == ActionStatus.DELIVERED
        later = trigger_draft_pick(draft(), publisher=up, settings=slow_drain)
    assert later.status is TriggerStatus.DUPLICATE and later.published and later.tracking_id == tracking_id
    [(body, _)] = read_queue("draft_targets")
    assert body["tracking_id"] == tracking_id
    assert count("activity_actions") == 1 and count("outbox_messages") == 1


def test_a_draft_target_without_expires_at_gets_the_default_expiry(publisher, pub_settings, read_queue):
    before = utcnow()
    result = trigger_draft_pick(draft(), publisher=publisher, settings=pub_settings)
    default = timedelta(seconds=pub_settings.draft_target_default_expiry_seconds)
    expires_at = outbox_row(result.tracking_id)["expires_at"]
    assert before + default <= expires_at <= utcnow() + default
    [(body, _)] = read_queue("draft_targets")
    assert body["expires_at"] == expires_at.isoformat()


def test_a_retry_after_the_saved_target_expired_is_a_conflict_and_sends_nothing(
    db, fresh_queues, pub_settings, amqp_vhost, frozen_clock, read_queue
):
    down = AmqpPublisher(url=DOWN_URL, connect_timeout=1)
    with pytest.raises(TriggerUnavailableError):
        trigger_draft_pick(draft(), publisher=down, settings=pub_settings)
    frozen_clock.advance(seconds=pub_settings.draft_target_default_expiry_seconds + 1)
    with AmqpPublisher(url=amqp_vhost) as up, pytest.raises(TriggerConflictError, match="expired"):
        trigger_draft_pick(draft(), publisher=up, settings=pub_settings)
    assert read_queue("draft_targets") == []


def test_a_draft_target_expires_while_waiting_in_the_outbox(
    db, fresh_queues, pub_settings, amqp_vhost, frozen_clock, read_queue
):
    down = AmqpPublisher(url=DOWN_URL, connect_timeout=1)
    with pytest.raises(TriggerUnavailableError) as info:
        trigger_draft_pick(
            draft(expires_at=utcnow() + timedelta(minutes=2)), publisher=down, settings=pub_settings
        )
    frozen_clock.advance(minutes=3)
    with AmqpPublisher(url=amqp_vhost) as up:
        report = drain_outbox(publisher=up, settings=pub_settings)
    assert report.expired == 1 and report.published == 0
    assert read_queue("draft_targets") == []
    assert outbox_row(info.value.tracking_id)["status"] == "expired"
    assert get_action(info.value.tracking_id).status == ActionStatus.SKIPPED
