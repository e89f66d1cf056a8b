"""Broker outage: RabbitMQ connections of this run's vhost are cut while 1,000 triggers run."""

from __future__ import annotations

import subprocess
import threading
import time
from collections import Counter

from models.db import database
from publisher.amqp import AmqpPublisher, read_messages
from publisher.drain import drain_outbox
from publisher.outbox import outbox_report
from publisher.triggers import trigger_lineup, trigger_waiver
from tests.publisher.helpers import lineup, waiver


def _cut_connections(vhost: str) -> None:
    subprocess.run(
        ["rabbitmqctl", "-q", "close_all_connections", "--vhost", vhost, "--limit", "100", "outage test"],
        capture_output=True,
        timeout=30,
        check=False,
    )


def test_connections_cut_during_1000_triggers_lose_nothing(fresh_queues, db, pub_settings, amqp_vhost):
    vhost = amqp_vhost.rsplit("/", 1)[1]
    stop = threading.Event()
    cuts = 0

    def cutter() -> None:
        nonlocal cuts
        while not stop.is_set():
            time.sleep(0.15)
            _cut_connections(vhost)
            cuts += 1

    thread = threading.Thread(target=cutter, daemon=True)
    results = []
    publisher = AmqpPublisher(url=amqp_vhost, connect_timeout=2)
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
    assert cuts >= 2
    failed_at_once = sum(not r.published for r in results)
    deadline = time.monotonic() + 60
    while outbox_report().backlog and time.monotonic() < deadline:
        time.sleep(0.06)  # past the test-sized backoff
        drain_outbox(publisher=publisher, settings=pub_settings)
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
