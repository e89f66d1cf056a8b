"""The AMQP boundary: wire format, passive declare of outbox queues, mandatory publishes."""

from __future__ import annotations

import subprocess
import uuid

import pytest

from harness.faultproxy import FaultProxy
from publisher.amqp import AmqpPublisher, OutgoingMessage
from publisher.errors import (
    MissingQueueError,
    PublishError,
    PublishNackedError,
    PublishUncertainError,
    UnroutableMessageError,
)
from publisher.queues import LINEUP_UPDATES, TRADE_RESPONSES, WAIVER_ACTIONS
from tests.intervals import SLACK_SECONDS
from tests.publisher.helpers import never_confirming, reject_all
from tests.rabbitmq import vhost_queues
from tests.racing import on_own_thread
from tests.waiting import wait_for


def _msg(queue: str, **body: object) -> OutgoingMessage:
    return OutgoingMessage(queue=queue, body=dict(body) or {"x": 1}, message_id=str(uuid.uuid4()))


def test_messages_are_persistent_json_with_a_message_id_on_the_default_exchange(publisher, read_queue):
    message = OutgoingMessage(
        queue=LINEUP_UPDATES, body={"a": 1}, message_id=str(uuid.uuid4()), headers={"traceparent": "t"}
    )
    publisher.publish(message)
    [(body, props)] = read_queue(LINEUP_UPDATES)
    assert body == {"a": 1}
    assert props.delivery_mode == 2
    assert props.content_type == "application/json"
    assert props.message_id == message.message_id
    assert props.headers == {"traceparent": "t"}


def test_a_missing_outbox_queue_is_a_configuration_error_naming_it_and_the_channel_recovers(publisher):
    publisher.delete_queue(WAIVER_ACTIONS)
    with pytest.raises(MissingQueueError, match="waiver_actions") as info:
        publisher.publish(_msg(WAIVER_ACTIONS))
    assert info.value.queue == WAIVER_ACTIONS
    publisher.publish(_msg(LINEUP_UPDATES))  # same publisher, channel reopened


def test_a_batch_with_a_missing_queue_still_publishes_the_other_queues(publisher, read_queue):
    publisher.delete_queue(WAIVER_ACTIONS)
    outcomes = publisher.publish_many([_msg(WAIVER_ACTIONS), _msg(LINEUP_UPDATES), _msg(LINEUP_UPDATES)])
    assert [o.confirmed for o in outcomes] == [False, True, True]
    assert isinstance(outcomes[0].error, MissingQueueError)
    assert len(read_queue(LINEUP_UPDATES)) == 2


def test_trade_queues_are_declared_durable_on_publish(publisher, read_queue, amqp_vhost):
    publisher.publish(_msg(TRADE_RESPONSES))
    assert len(read_queue(TRADE_RESPONSES)) == 1
    durable = vhost_queues(amqp_vhost, "durable")
    assert durable.get(TRADE_RESPONSES) == ["true"], durable  # survives a RabbitMQ restart


def test_a_message_returned_because_its_queue_vanished_is_a_missing_queue_not_a_silent_drop(publisher):
    publisher.check_queue(LINEUP_UPDATES)
    publisher.delete_queue(LINEUP_UPDATES)
    publisher._checked.add(LINEUP_UPDATES)  # as if it vanished after the check
    with pytest.raises(MissingQueueError, match="lineup_updates"):
        publisher.publish(_msg(LINEUP_UPDATES))


def test_a_returned_message_whose_queue_is_present_is_unroutable(publisher, monkeypatch):
    publisher.check_queue(LINEUP_UPDATES)
    publisher._checked.add(LINEUP_UPDATES)
    link = publisher.link
    real_on_confirm = link._on_confirm

    def return_then_confirm(frame):  # the broker returned it although the queue exists
        for message_id in list(link._unconfirmed.values()):
            link._batch.returned[message_id] = "312 NO_ROUTE"
        real_on_confirm(frame)

    monkeypatch.setattr(link, "_on_confirm", return_then_confirm)
    with pytest.raises(UnroutableMessageError, match="NO_ROUTE"):
        publisher.publish(_msg(LINEUP_UPDATES))


def test_a_nack_is_a_refusal_of_the_message(publisher, amqp_vhost):
    reject_all(amqp_vhost, LINEUP_UPDATES)
    with pytest.raises(PublishNackedError):
        publisher.publish(_msg(LINEUP_UPDATES))


def test_an_unreachable_broker_is_a_publish_error_naming_amqp_url():
    pub = AmqpPublisher(url="amqp://guest:secret@127.0.0.1:1/%2F", connect_timeout=1)
    with pytest.raises(PublishError, match="AMQP_URL") as info:
        pub.publish(_msg(LINEUP_UPDATES))
    assert "secret" not in str(info.value)


def test_a_large_batch_is_confirmed_message_by_message(publisher, read_queue):
    outcomes = publisher.publish_many([_msg(LINEUP_UPDATES, i=i) for i in range(2000)])
    assert all(o.confirmed for o in outcomes)
    assert sorted(b["i"] for b, _ in read_queue(LINEUP_UPDATES)) == list(range(2000))


@pytest.mark.parametrize(
    ("queue", "path"),
    [
        pytest.param("lineup_updates", "outbox", id="lineup_updates-outbox"),
        pytest.param("waiver_actions", "outbox", id="waiver_actions-outbox"),
        pytest.param("draft_targets", "outbox", id="draft_targets-outbox"),
        pytest.param("trade_submissions", "direct", id="trade_submissions-direct"),
        pytest.param("trade_responses", "direct", id="trade_responses-direct"),
        pytest.param("trade_negotiations", "direct", id="trade_negotiations-direct"),
        pytest.param("job_runs", "run_outbox", id="job_runs-run-outbox"),
    ],
)
def test_queue_table_outbox_queues_must_exist_and_trade_queues_are_declared_on_publish(
    publisher, queue, path
):
    from publisher.queues import DELIVERY

    assert DELIVERY[queue].value == path
    publisher.delete_queue(queue)
    if path == "direct":
        publisher.publish(_msg(queue))  # declared durable on publish
        publisher.close()
        publisher.publish(_msg(queue))  # and it survived: a fresh channel finds it
    else:
        with pytest.raises(MissingQueueError, match=queue):
            publisher.publish(_msg(queue))


def test_a_connection_the_broker_closed_while_idle_is_replaced_before_the_next_publish(
    amqp_vhost, fresh_queues, db, read_queue
):
    # The proxy only forwards: it shows the broker's close frame arrive and the publisher connect again.
    with FaultProxy(("127.0.0.1", 5672)) as proxy:
        publisher = AmqpPublisher(url=proxy.url_via(amqp_vhost), confirm_timeout=5.0)
        publisher.publish(_msg(LINEUP_UPDATES))
        assert proxy.connections == 1
        vhost = amqp_vhost.rsplit("/", 1)[1]
        before = proxy.bytes_to_clients
        subprocess.run(
            ["rabbitmqctl", "-q", "close_all_connections", "--vhost", vhost, "--limit", "100", "idle cut"],
            check=True,
            capture_output=True,
            timeout=60,
        )
        wait_for(lambda: proxy.bytes_to_clients > before, timeout=30, what="the broker's close to arrive")
        publisher.publish(_msg(LINEUP_UPDATES))
        assert proxy.accepted == 2  # a new connection, not the closed one
        publisher.close()
    assert len(read_queue(LINEUP_UPDATES)) == 2


def test_waiting_for_a_confirm_the_broker_never_sends_gives_up_after_the_confirm_timeout(
    amqp_vhost, fresh_queues, monkeypatch
):
    pub = AmqpPublisher(url=amqp_vhost, confirm_timeout=1.0)
    pub.publish(_msg(LINEUP_UPDATES))  # connection and confirm-mode channel are open
    monkeypatch.setattr(pub.link, "_on_confirm", lambda frame: None)  # the confirm never arrives
    outcomes, took = on_own_thread(
        lambda: pub.publish_many([_msg(LINEUP_UPDATES)]), limit=1.0 + 2 * SLACK_SECONDS
    )
    assert isinstance(outcomes[0].error, PublishUncertainError)
    assert "no confirm within 1s" in str(outcomes[0].error)
    assert 1.0 <= took < 1.0 + SLACK_SECONDS
    pub.close()


def test_a_batch_whose_confirm_never_arrives_is_uncertain_not_published(
    amqp_vhost, fresh_queues, monkeypatch
):
    pub = never_confirming(AmqpPublisher(url=amqp_vhost, confirm_timeout=1.0), monkeypatch)
    outcomes, _took = on_own_thread(lambda: pub.publish_many([_msg(LINEUP_UPDATES)]), limit=3.0)
    [outcome] = outcomes
    assert not outcome.confirmed
    assert isinstance(outcome.error, PublishUncertainError)
    assert "not confirmed" in str(outcome.error)
    pub.close()


def test_a_body_larger_than_a_frame_is_split_and_arrives_whole(publisher, read_queue):
    big = "x" * 300_000  # above the default frame_max of 131,072 bytes
    outcomes = publisher.publish_many([_msg(LINEUP_UPDATES, big=big), _msg(LINEUP_UPDATES, small=1)])
    assert all(o.confirmed for o in outcomes)
    bodies = [b for b, _ in read_queue(LINEUP_UPDATES)]
    assert bodies == [{"big": big}, {"small": 1}]
