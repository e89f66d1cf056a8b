"""The dispatch tick's batch send: many starts in one round trip (Redis) or one confirmed batch (RabbitMQ)."""

from __future__ import annotations

import uuid

import pytest
from dramatiq import Middleware

from lifecycle.dispatch import StartMessage, new_message_id
from tests.lifecycle.conftest import BOTH_BROKERS

pytestmark = pytest.mark.services  # a real broker on BROKER_URL


@pytest.fixture
def broker(lifecycle_env, worker_broker):
    from actors.actor_runtime import current

    broker = current().broker
    yield broker
    if worker_broker == "redis":
        for key in broker.client.scan_iter(match=f"{broker.namespace}:*"):
            broker.client.delete(key)


def _starts(n: int) -> list[StartMessage]:
    ids = [str(uuid.uuid4()) for _ in range(n)]
    return [StartMessage(match_id=m, message_id=new_message_id(m)) for m in ids]


def _consume(broker, queue_name: str, n: int) -> list:
    consumer = broker.consume(queue_name, prefetch=n, timeout=200)
    got = []
    try:
        for _ in range(n + 50):
            proxy = next(consumer)
            if proxy is not None:
                got.append(proxy)
                consumer.ack(proxy)
            if len(got) == n:
                break
    finally:
        consumer.close()
    return got


@BOTH_BROKERS
def test_a_batch_of_starts_is_consumed_in_order_with_the_saved_message_ids(broker):
    from actors.listeners import send_starts, start_match_listener

    starts = _starts(1200)  # more than one Redis command chunk (1,000)
    send_starts(starts)

    got = _consume(broker, start_match_listener.queue_name, len(starts))

    assert [p.message_id for p in got] == [s.message_id for s in starts]
    assert [p.kwargs["match_id"] for p in got] == [s.match_id for s in starts]
    assert all(p.actor_name == "start_match_listener" for p in got)


def test_a_batch_stores_each_message_the_way_one_enqueue_stores_it(broker):
    from actors.listeners import send_start, send_starts, start_match_listener

    one, many = _starts(1), _starts(3)
    send_start(one[0])
    send_starts(many)
    queue_key = f"{broker.namespace}:{start_match_listener.queue_name}"

    redis_ids = [i.decode() for i in broker.client.lrange(queue_key, 0, -1)]
    bodies = broker.client.hgetall(f"{queue_key}.msgs")

    assert len(redis_ids) == 4 and set(redis_ids) == {k.decode() for k in bodies}
    assert broker.client.zscore(f"{broker.namespace}:__heartbeats__", broker.broker_id) is not None


def test_a_batch_emits_the_enqueue_middleware_events_for_every_message(broker):
    from actors.listeners import send_starts

    class Seen(Middleware):
        def __init__(self) -> None:
            self.before: list[str] = []
            self.after: list[str] = []

        def before_enqueue(self, broker, message, delay):
            self.before.append(message.message_id)

        def after_enqueue(self, broker, message, delay):
            self.after.append(message.message_id)

    seen = Seen()
    broker.middleware.append(seen)
    try:
        starts = _starts(3)
        send_starts(starts)
    finally:
        broker.middleware.remove(seen)

    assert seen.before == seen.after == [s.message_id for s in starts]
