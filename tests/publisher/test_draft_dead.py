"""A draft target whose message is dead answers 409 naming how to revive it, not "retry with the key"."""

from __future__ import annotations

import json

import pytest

from models.activity import ActionStatus
from publisher.actions import get_action
from publisher.errors import DeadDeliveryError, TriggerUnavailableError
from publisher.outbox import retry_dead
from publisher.queues import DRAFT_TARGETS
from publisher.triggers import TriggerStatus, trigger_draft_pick
from tests.publisher.helpers import draft, outbox_row, reject_all


def _dead_target(publisher, settings, amqp_vhost) -> str:
    """A draft target the broker refused to the last attempt; the retry that used it up answers dead."""
    reject_all(amqp_vhost, DRAFT_TARGETS)
    with pytest.raises(TriggerUnavailableError) as first:
        trigger_draft_pick(draft(), publisher=publisher, settings=settings)
    tracking_id = first.value.tracking_id
    for _ in range(settings.outbox_max_attempts - 2):
        with pytest.raises(TriggerUnavailableError):
            trigger_draft_pick(draft(), publisher=publisher, settings=settings)
    with pytest.raises(DeadDeliveryError) as last:
        trigger_draft_pick(draft(), publisher=publisher, settings=settings)
    assert last.value.tracking_id == tracking_id
    assert outbox_row(tracking_id)["status"] == "dead"
    return tracking_id


def test_a_retry_of_a_dead_draft_target_is_a_conflict_naming_retry_dead_and_a_new_key(
    publisher, pub_settings, amqp_vhost
):
    tracking_id = _dead_target(publisher, pub_settings, amqp_vhost)
    with pytest.raises(DeadDeliveryError) as again:
        trigger_draft_pick(draft(), publisher=publisher, settings=pub_settings)
    assert not again.value.retryable and again.value.tracking_id == tracking_id
    row_id = outbox_row(tracking_id)["id"]
    assert f"kickoff outbox retry-dead {row_id}" in str(again.value)
    assert "new idempotency key" in str(again.value) and "nacked" in str(again.value)
    assert get_action(tracking_id).status == ActionStatus.FAILED

    publisher.delete_queue(DRAFT_TARGETS)  # the operator fixes the cause and revives the row
    publisher.declare_durable([DRAFT_TARGETS])
    assert retry_dead(ids=[row_id]).rows == 1
    revived = trigger_draft_pick(draft(), publisher=publisher, settings=pub_settings)
    assert revived.status is TriggerStatus.QUEUED and revived.tracking_id == tracking_id


def test_kickoff_trigger_draft_pick_answers_a_dead_target_with_the_conflict_exit_code(
    publisher, pub_settings, amqp_vhost, run
):
    from cli.answers import EXIT_CONFLICT

    tracking_id = _dead_target(publisher, pub_settings, amqp_vhost)
    req = draft()
    args = ["--league", req.league_id, "--team", req.team_id, "--pick", str(req.pick_number)]
    args += ["--espn-id", str(req.espn_id), "--key", req.idempotency_key, "--json"]
    code, output = run("trigger", "draft-pick", *args)
    assert code == EXIT_CONFLICT, output
    answer = json.loads(output.splitlines()[-1])
    assert answer["status"] == "conflict" and answer["tracking_id"] == tracking_id
    assert "retry-dead" in answer["error"]
