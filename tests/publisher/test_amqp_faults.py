"""The AMQP boundary behind a fault proxy: refused, black-holed and cut links are unavailability."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator

import pytest

from harness.faultproxy import FaultProxy
from publisher.amqp import AmqpPublisher, OutgoingMessage
from publisher.errors import BrokerConnectionError, PublishUncertainError
from publisher.queues import LINEUP_UPDATES, WAIVER_ACTIONS
from tests.waiting import wait_for

# A hung broker must not hold a publish until the heartbeat notices (2 x 30 s): the confirm
# timeout and the connect timeout bound it. Generous, so a loaded machine does not fail it.
WELL_BEFORE_HEARTBEAT = 25.0


@pytest.fixture
def proxy(fresh_queues) -> Iterator[FaultProxy]:
    with FaultProxy(("127.0.0.1", 5672)) as p:
        yield p


@pytest.fixture
def proxied(proxy, amqp_vhost) -> Iterator[AmqpPublisher]:
    pub = AmqpPublisher(url=proxy.url_via(amqp_vhost), confirm_timeout=2.0, connect_timeout=1.0)
    yield pub
    pub.close()


def _msg() -> OutgoingMessage:
    return OutgoingMessage(queue=LINEUP_UPDATES, body={"x": 1}, message_id=str(uuid.uuid4()))


def test_a_refused_connect_is_broker_unavailability_naming_amqp_url(proxy, proxied):
    proxy.refuse()
    [outcome] = proxied.publish_many([_msg()])
    assert isinstance(outcome.error, BrokerConnectionError) and "AMQP_URL" in str(outcome.error)


def test_a_black_holed_handshake_is_broker_unavailability_not_a_raw_pika_error(proxy, proxied):
    proxy.blackhole()
    started = time.monotonic()
    [outcome] = proxied.publish_many([_msg()])
    assert isinstance(outcome.error, BrokerConnectionError) and "AMQP_URL" in str(outcome.error)
    assert time.monotonic() - started < WELL_BEFORE_HEARTBEAT


def test_a_confirm_lost_in_a_black_hole_is_uncertain_and_the_publisher_recovers(proxy, proxied, read_queue):
    assert proxied.publish_many([_msg()])[0].confirmed  # connected before the link hangs
    proxy.blackhole()
    started = time.monotonic()
    lost = _msg()
    [outcome] = proxied.publish_many([lost])
    assert isinstance(outcome.error, PublishUncertainError)
    assert time.monotonic() - started < WELL_BEFORE_HEARTBEAT  # closing it did not wait for Close-Ok
    proxy.forward()
    again = _msg()
    assert proxied.publish_many([again])[0].confirmed
    ids = [p.message_id for _, p in read_queue(LINEUP_UPDATES)]
    assert lost.message_id not in ids and again.message_id in ids  # swallowed by the black hole


def test_a_clean_close_of_a_black_holed_connection_does_not_hang(proxy, proxied):
    assert proxied.publish_many([_msg()])[0].confirmed
    proxy.blackhole()
    started = time.monotonic()
    proxied.close()
    assert time.monotonic() - started < WELL_BEFORE_HEARTBEAT


def test_a_clean_close_the_broker_never_answers_ends_within_its_timeout(proxy, proxied):
    assert proxied.publish_many([_msg()])[0].confirmed  # open
    link = proxied.link
    proxy.blackhole()
    started = time.monotonic()
    link.close(timeout=1.0)  # Close-Ok never comes: the socket is shut at the deadline
    assert time.monotonic() - started < WELL_BEFORE_HEARTBEAT
    assert not link.is_open
    wait_for(lambda: proxy.connections == 0, timeout=10, what="the link's TCP connection to end")


def test_a_queue_check_on_a_black_holed_connection_is_unavailability_not_a_hang(proxy, proxied):
    """The first publish to a queue on a connection checks the queue (a declare): its answer has a
    deadline too, or a link that hangs holds the publish until the heartbeat notices."""
    assert proxied.publish_many([_msg()])[0].confirmed  # connected; lineup_updates checked
    proxy.blackhole()
    started = time.monotonic()
    waiver = OutgoingMessage(queue=WAIVER_ACTIONS, body={"x": 2}, message_id=str(uuid.uuid4()))
    [outcome] = proxied.publish_many([waiver])
    assert isinstance(outcome.error, BrokerConnectionError) and "AMQP_URL" in str(outcome.error)
    assert time.monotonic() - started < WELL_BEFORE_HEARTBEAT


def test_a_batch_whose_second_queue_check_loses_the_link_is_unavailability_for_every_message(proxy, proxied):
    """The checked queue's message was never sent (the checks come first): unavailable, not uncertain,
    and not an AttributeError from the channel the failed check dropped."""
    assert proxied.publish_many([_msg()])[0].confirmed
    proxy.blackhole()
    waiver = OutgoingMessage(queue=WAIVER_ACTIONS, body={"x": 2}, message_id=str(uuid.uuid4()))
    started = time.monotonic()
    outcomes = proxied.publish_many([_msg(), waiver])
    assert [type(o.error) for o in outcomes] == [BrokerConnectionError, BrokerConnectionError]
    assert time.monotonic() - started < WELL_BEFORE_HEARTBEAT
    proxy.forward()
    assert all(o.confirmed for o in proxied.publish_many([_msg(), waiver]))  # reconnected
