"""Broker outage: publishes are cut mid-flight by a fault proxy while 1,000 triggers run."""

from __future__ import annotations

import struct
import threading
from collections import Counter

import pika.spec

from harness.faultproxy import FaultProxy
from models.db import database
from publisher.amqp import AmqpPublisher, read_messages
from publisher.drain import drain_outbox
from publisher.outbox import outbox_report
from publisher.triggers import trigger_lineup, trigger_waiver
from tests.publisher.helpers import lineup, waiver
from tests.waiting import wait_for

#: An AMQP method frame (type 1) of Basic.Publish: class 60, method 40 after type, channel and size.
PUBLISH_METHOD = struct.pack(">I", pika.spec.Basic.Publish.INDEX)


def _starts_a_publish(data: bytes) -> bool:
    return data[:1] == b"\x01" and data[7:11] == PUBLISH_METHOD


def test_connections_cut_during_1000_triggers_lose_nothing(fresh_queues, db, pub_settings, amqp_vhost):
    with FaultProxy(("127.0.0.1", 5672)) as proxy:
        _publish_through_cuts(proxy, pub_settings, amqp_vhost)


def _publish_through_cuts(proxy: FaultProxy, pub_settings, amqp_vhost: str) -> None:
    stop = threading.Event()

    def cutter() -> None:
        """Cut a connection as it sends a publish, then let a few triggers through, until stopped."""
        while not stop.is_set():
            hit = proxy.cut_on(_starts_a_publish)
            while not hit.wait(0.05) and not stop.is_set():
                pass
            stop.wait(0.15)
        proxy.cancel_cut_on()

    thread = threading.Thread(target=cutter, daemon=True)
    results = []
    publisher = AmqpPublisher(url=proxy.url_via(amqp_vhost), connect_timeout=2)
    thread.start()
    try:
        for i in range(1000):
            if i % 2:
                request = lineup(idempotency_key=f"lineup-7-{i}")
                results.append(trigger_lineup(request, publisher=publisher, settings=pub_settings))
            else:
                request = waiver(add_player_id=1_000_000 + i, idempotency_key=f"waiver-7-{i}")
                results.append(trigger_waiver(request, publisher=publisher, settings=pub_settings))
    finally:
        stop.set()
        thread.join(60)
    assert not thread.is_alive()
    cuts = proxy.cuts_on_match  # connections cut as they carried a publish
    failed_at_once = sum(not r.published for r in results)
    assert cuts >= 2
    assert failed_at_once >= cuts  # each cut publish was answered pending, left to the drain

    def drained() -> bool:
        drain_outbox(publisher=publisher, settings=pub_settings)
        return not outbox_report().backlog

    wait_for(
        drained, timeout=60, interval=0.06, what="the outbox drained"
    )  # 0.06 s: past the test-sized backoff
    publisher.close()
    assert outbox_report().backlog == 0 and outbox_report().dead == 0

    messages = read_messages(url=amqp_vhost, queue="lineup_updates") + read_messages(
        url=amqp_vhost, queue="waiver_actions"
    )
    by_message_id = Counter(p.message_id for _, p in messages)
    delivered = {b["tracking_id"] for b, _ in messages}
    assert delivered == {r.tracking_id for r in results}  # none lost
    assert len(by_message_id) == 1000  # duplicates, if any, share their message id
    duplicates = len(messages) - 1000
    rows = database.execute_sql("SELECT count(*) FROM outbox_messages WHERE status = 'published'").fetchone()[
        0
    ]
    assert rows == 1000
    # A duplicate only comes from a row that was published, not marked, and published again.
    repeated = [m for m, n in by_message_id.items() if n > 1]
    if repeated:
        attempts = database.execute_sql(
            "SELECT min(tries) FROM outbox_messages WHERE message_id::text = ANY(%s)", (repeated,)
        ).fetchone()[0]
        assert attempts >= 2
    print(f"cuts={cuts} failed_at_once={failed_at_once} duplicates={duplicates}")
