"""Starts a dead listener worker had fetched from the Redis broker and not begun go back on the queue
as soon as a reaper finds the worker dead, not after Dramatiq's 60 s heartbeat timeout
(actors.fetched_starts)."""

from __future__ import annotations

import uuid

import pytest
from dramatiq import Message
from dramatiq.brokers.redis import RedisBroker

from actors import dramatiq_compat
from actors.broker import QUEUE_MATCH_LISTENERS, KickoffRedisBroker
from actors.fetched_starts import RECORD_EVERY_SECONDS, FetchedStarts
from tests.waiting import wait_for

pytestmark = [pytest.mark.services, pytest.mark.usefixtures("starts_ungated")]


def _unacked(broker: RedisBroker) -> set[bytes]:
    """What ``broker``'s process fetched from the listener queue and has not acked (Dramatiq's layout)."""
    consumer = dramatiq_compat.consumer_id(broker)
    assert consumer is not None
    return broker.client.smembers(dramatiq_compat.fetched_key(broker, consumer, QUEUE_MATCH_LISTENERS))


def test_the_starts_a_killed_worker_fetched_are_requeued_once_for_another_worker_and_a_live_ones_kept(
    test_env,
):
    namespace = f"{test_env['BROKER_NAMESPACE']}-fetched-{uuid.uuid4().hex[:8]}"
    url = test_env["BROKER_URL"]
    killed, alive, reaper = (KickoffRedisBroker(url=url, namespace=namespace) for _ in "abc")
    try:
        for broker in (killed, alive, reaper):
            broker.declare_queue(QUEUE_MATCH_LISTENERS)
        for n in range(4):
            reaper.enqueue(Message(QUEUE_MATCH_LISTENERS, "start_match_listener", (n,), {}, {}))
        FetchedStarts(killed).record("killed-lease")
        FetchedStarts(alive).record("alive-lease")
        # the killed worker fetches three (one handed to a thread, two in its consumer's cache), then
        # dies before running any: it never acks, requeues or closes
        doomed = killed.consume(QUEUE_MATCH_LISTENERS, prefetch=6)
        first = wait_for(lambda: next(doomed), timeout=30, what="the killed worker's fetch")
        assert len(_unacked(killed)) == 3, "Dramatiq's ack set layout changed (actors.dramatiq_compat)"
        living = alive.consume(QUEUE_MATCH_LISTENERS, prefetch=2)
        kept = wait_for(lambda: next(living), timeout=30, what="the live worker's fetch")

        assert FetchedStarts(reaper).requeue_of(["killed-lease", "never-recorded"]) == 3
        assert FetchedStarts(reaper).requeue_of(["killed-lease"]) == 0  # its record went with them
        assert _unacked(killed) == set() and len(_unacked(alive)) == 1  # a live worker's is its own

        found: list[int] = []
        elsewhere = reaper.consume(QUEUE_MATCH_LISTENERS, prefetch=8)

        def the_three_fetched_again() -> bool:
            message = next(elsewhere)
            if message is not None:
                found.append(message.args[0])
            return len(found) == 3

        wait_for(the_three_fetched_again, timeout=20, what="the killed worker's three starts, elsewhere")
        assert first.args[0] in found and kept.args[0] not in found
        assert sorted([*found, kept.args[0]]) == [0, 1, 2, 3]
    finally:
        for broker in (killed, alive, reaper):
            broker.client.delete(*(broker.client.keys(f"{namespace}:*") or [namespace]))
            broker.close()


def test_a_worker_writes_its_record_when_its_lease_changes_and_once_a_minute_otherwise(test_env):
    namespace = f"{test_env['BROKER_NAMESPACE']}-record-{uuid.uuid4().hex[:8]}"
    broker = KickoffRedisBroker(url=test_env["BROKER_URL"], namespace=namespace)
    fetched = FetchedStarts(broker)
    key = f"{namespace}:{dramatiq_compat.CONSUMER_OF_LEASE}"
    try:
        fetched.record("first", now=100.0)
        assert broker.client.get(f"{key}.first").decode() == dramatiq_compat.consumer_id(broker)
        broker.client.delete(f"{key}.first")
        fetched.record("first", now=100.0 + RECORD_EVERY_SECONDS / 2)  # not due: nothing written
        assert broker.client.get(f"{key}.first") is None
        fetched.record("first", now=100.0 + RECORD_EVERY_SECONDS)
        assert broker.client.get(f"{key}.first") is not None and broker.client.ttl(f"{key}.first") > 60
        fetched.record("second", now=100.0 + RECORD_EVERY_SECONDS)  # a new lease: at once
        assert broker.client.get(f"{key}.second") is not None
        fetched.record(None)  # no lease held: nothing
    finally:
        broker.client.delete(*(broker.client.keys(f"{namespace}:*") or [namespace]))
        broker.close()
