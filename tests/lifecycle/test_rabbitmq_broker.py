"""The RabbitMQ broker (BROKER_URL=amqp://): running listeners hold no unacked delivery; quorum queues."""

from __future__ import annotations

import json

import pytest

from tests.lifecycle.conftest import ON_AMQP
from tests.lifecycle.helpers import dispatch_now, open_rows
from tests.rabbitmq import vhost_queues
from tests.waiting import wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.parametrize("worker_broker", [ON_AMQP], indirect=True)]


def test_a_running_listener_holds_no_unacked_delivery_so_no_consumer_timeout_can_redeliver_it(
    make_match, lsettings, lcoordination, send_start, start_worker, lifecycle_env
):
    matches = [make_match(status="inprogress") for _ in range(3)]
    worker = start_worker(threads=4)
    ctx = {"settings": lsettings, "coordination": lcoordination}
    assert dispatch_now(ctx, send_start).enqueued == 3
    for m in matches:
        wait_for(lambda m=m: open_rows(m), timeout=60)
    # RabbitMQ's consumer_timeout (30 min by default) only ever closes a channel over an unacked
    # delivery: the lifecycle acked each start once it consumed it, while the listeners run on.
    queues = wait_for(
        lambda: (
            (q := vhost_queues(lifecycle_env["BROKER_URL"], "messages_unacknowledged", "messages_ready"))
            and q.get("match_listeners") == ["0", "0"]
            and q
        ),
        timeout=30,
    )
    assert queues["match_listeners"] == ["0", "0"]
    assert all(len(open_rows(m)) == 1 for m in matches)
    assert "Failed to ack" not in worker.output()


def test_a_listener_run_that_fails_after_its_early_ack_is_still_dead_lettered(
    make_match, lcoordination, send_start, start_worker, lifecycle_env
):
    from lifecycle.dispatch import request_start
    from publisher.amqp import read_messages
    from tests.lifecycle.helpers import quick

    failing = make_match(listener_start_settings=quick(listener_force_exit_code=11))
    message, _ = request_start(
        str(failing.id), overrides=None, force=False, coordination=lcoordination, send=send_start
    )
    start_worker(threads=1)
    dead: list[str] = []

    def dead_lettered() -> bool:
        url = lifecycle_env["BROKER_URL"]
        dead.extend(body["message_id"] for body, _ in read_messages(url=url, queue="match_listeners.XQ"))
        return message.message_id in dead

    wait_for(dead_lettered, timeout=60)
    assert dead == [message.message_id]


def test_quorum_queues_are_declared_for_match_listeners_when_asked(lifecycle_env, worker_broker):
    from actors.broker import build_broker
    from config.settings import MatchListenerEnvironment

    broker = build_broker(MatchListenerEnvironment(_env_file=None, broker_quorum_queues=True))
    try:
        broker.declare_queue("match_listeners", ensure=True)
        broker.declare_queue("default", ensure=True)
    finally:
        broker.close()
    types = vhost_queues(lifecycle_env["BROKER_URL"], "type", "durable")
    assert types["match_listeners"] == ["quorum", "true"]
    assert types["match_listeners.DQ"] == ["quorum", "true"]
    assert types["default"] == ["classic", "true"]


def test_kickoff_check_and_dead_letters_work_on_the_rabbitmq_broker(kick, worker_broker, start_worker):
    start_worker(queues=("match_listeners",), threads=1)
    checks = {c["name"]: c for c in json.loads(kick("check", "--json", code=1).output)["checks"]}
    assert checks["Dramatiq broker"]["status"] == "ok", checks["Dramatiq broker"]
    assert checks["workers on match_listeners"]["status"] == "ok", checks["workers on match_listeners"]
    assert checks["queue match_listeners"]["detail"].startswith("0 waiting, 0 delayed")
    out = kick("dead-letters", "list", code=1).output
    assert "match_listeners.XQ" in out and "Traceback" not in out
