"""Drains publishing side by side take turns to write a batch (``AmqpLink.send_turn``): a link
writes only while holding the turn and gives it back before it awaits its confirms."""

from __future__ import annotations

import threading
import uuid
from concurrent.futures import ThreadPoolExecutor

import pytest

from publisher.amqp import AmqpPublisher, OutgoingMessage
from publisher.queues import LINEUP_UPDATES
from tests.publisher.helpers import never_confirming
from tests.rabbitmq import vhost_queues
from tests.waiting import wait_for


def _batch(n: int) -> list[OutgoingMessage]:
    return [
        OutgoingMessage(queue=LINEUP_UPDATES, body={"n": i}, message_id=str(uuid.uuid4())) for i in range(n)
    ]


def _ready(amqp_vhost: str) -> int:
    return int(vhost_queues(amqp_vhost, "messages_ready")[LINEUP_UPDATES][0])


def test_a_link_writes_no_frame_of_a_batch_before_it_holds_the_send_turn(
    publisher: AmqpPublisher, amqp_vhost: str
) -> None:
    publisher.check_queue(LINEUP_UPDATES)  # connected and checked: only the batch is left to send
    turn = threading.Lock()
    publisher.link.send_turn = turn
    turn.acquire()
    with ThreadPoolExecutor(1) as pool:
        sending = pool.submit(publisher.publish_many, _batch(20))
        assert _ready(amqp_vhost) == 0, "the batch went out while another link held the turn"
        assert not sending.done()
        turn.release()
        outcomes = sending.result(timeout=30)
    assert all(o.confirmed for o in outcomes)
    assert _ready(amqp_vhost) == 20


def test_the_send_turn_is_free_while_a_link_awaits_its_confirms(
    publisher: AmqpPublisher, amqp_vhost: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    publisher.check_queue(LINEUP_UPDATES)
    turn = threading.Lock()
    publisher.link.send_turn = turn
    never_confirming(publisher, monkeypatch)  # the link waits for confirms until its timeout
    publisher.confirm_timeout = 20.0
    with ThreadPoolExecutor(1) as pool:
        waiting = pool.submit(publisher.publish_many, _batch(20))
        wait_for(lambda: _ready(amqp_vhost) == 20, timeout=30, what="the batch written")
        assert turn.acquire(timeout=10), "the turn was kept while the link awaited its confirms"
        assert not waiting.done()
        turn.release()
        outcomes = waiting.result(timeout=60)
    assert not any(o.confirmed for o in outcomes)
