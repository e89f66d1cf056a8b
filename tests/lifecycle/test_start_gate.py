"""A listener worker takes starts only while it may run them: not draining, and its worker lease held."""

from __future__ import annotations

import uuid
from concurrent.futures import ThreadPoolExecutor

import pytest
from dramatiq import Message
from dramatiq.brokers.redis import RedisBroker

from actors import draining
from actors.broker import QUEUE_MATCH_LISTENERS, KickoffRedisBroker
from actors.draining import DrainableConsumer, gate_starts_on, taking_starts
from tests.lifecycle.conftest import CountingStarts
from tests.waiting import wait_for

pytestmark = pytest.mark.usefixtures("starts_ungated")


def test_a_worker_without_its_lease_fetches_no_start_until_it_holds_one_again():
    held = [False]
    gate_starts_on(lambda: held[0])
    inner = CountingStarts()
    consumer = DrainableConsumer(inner)  # type: ignore[arg-type]
    assert not taking_starts()
    assert next(consumer) is None and inner.fetches == 0  # left in the queue for the other workers
    held[0] = True
    assert taking_starts() and next(consumer) == "start" and inner.fetches == 1


def test_a_draining_worker_takes_no_start_even_with_its_lease():
    gate_starts_on(lambda: True)
    draining.stop_taking_starts()
    inner = CountingStarts()
    assert next(DrainableConsumer(inner)) is None and inner.fetches == 0  # type: ignore[arg-type]


class _EmptyQueue:
    """An inner consumer whose fetches find nothing (Dramatiq's answers None after its back-off)."""

    def __init__(self) -> None:
        self.fetches = 0

    def __next__(self) -> None:
        self.fetches += 1
        return None


def test_an_idle_consumer_fetches_again_at_once_when_its_own_process_sends_a_start():
    gate_starts_on(lambda: True)
    inner = _EmptyQueue()
    # An idle poll far longer than the test's deadline: only the start sent here can end the wait.
    consumer = DrainableConsumer(inner, idle_seconds=3600)  # type: ignore[arg-type]
    with ThreadPoolExecutor(1) as pool:
        waiting = pool.submit(next, consumer)
        wait_for(lambda: inner.fetches == 1)
        draining.starts_sent()  # a reaper of this process restarted a dead worker's matches
        assert waiting.result(timeout=30) is None
    assert inner.fetches == 1


def test_a_start_sent_while_the_consumer_fetches_is_not_missed():
    gate_starts_on(lambda: True)

    class SentDuringTheFetch(_EmptyQueue):
        def __next__(self) -> None:
            draining.starts_sent()  # sent after the wait's signal was cleared, before the wait
            return super().__next__()

    inner = SentDuringTheFetch()
    consumer = DrainableConsumer(inner, idle_seconds=3600)  # type: ignore[arg-type]
    with ThreadPoolExecutor(1) as pool:
        assert pool.submit(next, consumer).result(timeout=30) is None
    assert inner.fetches == 1


@pytest.mark.services
@pytest.mark.parametrize("how", ["gate closes", "consumer closes"])
def test_starts_fetched_but_not_taken_go_back_to_the_queue_when_the_worker_stops_taking_starts(test_env, how):
    """Dramatiq's Redis consumer fetches a batch of starts and hands them to its worker one by one; the
    rest wait in its cache, already in the broker's ack set of this worker. When the worker stops taking
    starts (its gate closes: a lost feed, a lost lease, a shutdown's drain) or its consumer closes, they
    go back to the queue at once, for another worker. Kept, they would wait out the broker's heartbeat
    timeout (60 s), one way a match given back as its host is deployed can wait a minute for a start
    (docs/reliability.md finding 15)."""
    namespace = f"{test_env['BROKER_NAMESPACE']}-gate-{uuid.uuid4().hex[:8]}"
    ours = KickoffRedisBroker(url=test_env["BROKER_URL"], namespace=namespace)
    other = RedisBroker(url=test_env["BROKER_URL"], namespace=namespace)  # another worker, no gate
    try:
        for broker in (ours, other):
            broker.declare_queue(QUEUE_MATCH_LISTENERS)
        for n in range(3):
            ours.enqueue(Message(QUEUE_MATCH_LISTENERS, "start_match_listener", (n,), {}, {}))
        gate = [True]
        gate_starts_on(lambda: gate[0])
        consumer = ours.consume(QUEUE_MATCH_LISTENERS, prefetch=16)  # a batch of up to 8 per fetch
        taken = wait_for(lambda: next(consumer), timeout=30, what="the first start fetched")
        if how == "gate closes":
            gate[0] = False
            assert next(consumer) is None
        else:
            consumer.close()
        elsewhere = other.consume(QUEUE_MATCH_LISTENERS, prefetch=8, timeout=100)
        found: list[int] = []

        def the_rest_fetched() -> bool:
            message = next(elsewhere)
            if message is not None:
                found.append(message.args[0])
            return len(found) == 2

        # well inside the broker's 60 s heartbeat timeout, after which they would come back anyway
        wait_for(the_rest_fetched, timeout=20, what="the two starts not taken, fetched by the other worker")
        assert sorted([taken.args[0], *found]) == [0, 1, 2]
    finally:
        for broker in (ours, other):
            broker.client.delete(*(broker.client.keys(f"{namespace}:*") or [namespace]))
            broker.close()
