"""The actor layer: a failed run is a failed Dramatiq message, a skip a successful one, the develop
dispatch passes is_test=True, and start_match_listener has no time limit."""

from __future__ import annotations

import json
import uuid

import pytest

from lifecycle.dispatch import request_start
from tests import intervals
from tests.lifecycle.conftest import BOTH_BROKERS
from tests.lifecycle.helpers import dead_run, live_row, quick, rows_of
from tests.waiting import wait_for

QUEUE = "match_listeners"


@pytest.fixture
def broker_keys(lifecycle_env, worker_broker):
    """Message ids still queued on this run's broker, and those dead-lettered.

    RabbitMQ: the dead-letter queue is drained into a set kept across calls; a queue with ready
    messages counts as holding every message the test sent (the queues are this test's alone).
    """
    from models.coordination import connect_redis

    if worker_broker == "amqp":
        from actors.rabbitmq import queue_depths
        from publisher.amqp import read_messages

        dead_seen: set[str] = set()

        def read_amqp(queue: str, ours: set[str] | None = None) -> tuple[set[str], set[str]]:
            url = lifecycle_env["BROKER_URL"]
            dead_seen.update(body["message_id"] for body, _ in read_messages(url=url, queue=f"{queue}.XQ"))
            waiting = queue_depths(url, queue)[0]
            return (set(ours or ()) if waiting else set()), set(dead_seen)

        yield read_amqp
        return

    client = connect_redis(lifecycle_env["BROKER_URL"])
    ns = lifecycle_env["BROKER_NAMESPACE"]

    def read(queue: str, ours: set[str] | None = None) -> tuple[set[str], set[str]]:
        def ids(key: str) -> set[str]:  # the hashes are keyed by the broker's own id: read the bodies
            return {json.loads(body)["message_id"] for body in client.hvals(key)}

        return ids(f"{ns}:{queue}.msgs"), ids(f"{ns}:{queue}.XQ.msgs")

    yield read
    for key in client.scan_iter(match=f"{ns}:*"):
        client.delete(key)


@pytest.mark.e2e
@BOTH_BROKERS
def test_a_failed_run_is_a_failed_message_and_a_skip_a_successful_one(
    make_match, lcoordination, start_worker, broker_keys
):
    from actors.listeners import send_start

    failing = make_match(listener_start_settings=quick(listener_force_exit_code=11))
    skipped = make_match(listener_start_settings=quick(listener_test_exit_code=0))
    # The skipped match's open row must look alive however long the worker takes to boot.
    worker = start_worker(threads=2, env=intervals.env("booting_worker"))
    live_row(skipped)  # an active listener elsewhere: the start is skipped_active
    sent = {}
    for name, match in (("failing", failing), ("skipped", skipped)):
        message, _ = request_start(
            str(match.id), overrides=None, force=False, coordination=lcoordination, send=send_start
        )
        sent[name] = message.message_id

    ours = set(sent.values())  # messages other tests left in the namespace do not count

    def settled() -> bool:
        queued, dead = broker_keys(QUEUE, ours)
        return not (queued & ours) and sent["failing"] in dead

    wait_for(settled, timeout=120)
    queued, dead = broker_keys(QUEUE, ours)
    assert not (queued & ours)
    assert dead & ours == {sent["failing"]}  # the failed run is a failed message (dead-lettered, no retry)
    assert sent["skipped"] not in dead  # the skip was acked: a successful message
    [row] = rows_of(failing)
    assert row.exit_code == 11 and lcoordination.barriers.attempts(failing.id) == 1
    # The worker's log lines may reach its output file after the broker moved the message (CI saw it).
    wait_for(
        lambda: "ListenerRunFailed" in worker.output() and "skipped_active" in worker.output(),
        timeout=60,
        what="the failure and the skip in the worker's log",
    )


def test_the_develop_dispatch_passes_is_test_true(make_match, broker_keys):
    from actors.listeners import dispatch_upcoming_test_match_listeners

    test_match = make_match(is_test=True)
    make_match(is_test=False)
    before, _ = broker_keys(QUEUE)  # another test's start messages may still be in this run's namespace
    result = dispatch_upcoming_test_match_listeners.fn()
    assert result["match_ids"] == [str(test_match.id)] and result["enqueued"] == 1
    queued, _ = broker_keys(QUEUE)
    assert len(queued - before) == 1


def test_a_sweep_that_reaps_a_dead_workers_row_dispatches_its_match_again_at_once(
    make_match, lcoordination, broker_keys
):
    from actors.listeners import sweep_stale_match_listeners

    match = make_match(status="inprogress")
    dead = dead_run(match, lcoordination)  # a row whose heartbeat is long past the stale threshold
    before, _ = broker_keys(QUEUE)
    result = sweep_stale_match_listeners.fn()
    assert result["matches"] == [str(match.id)] and rows_of(match)[0].id == uuid.UUID(dead)
    queued, _ = broker_keys(QUEUE)
    assert len(queued - before) == 1  # not left waiting for the next dispatch tick


def test_start_match_listener_has_no_time_limit_and_no_retries():
    """The broker's TimeLimit middleware reads an infinite limit for a start message."""
    from dramatiq.middleware import TimeLimit

    from actors.actor_runtime import current
    from actors.listeners import start_match_listener, start_message
    from lifecycle.dispatch import StartMessage, new_message_id

    assert start_match_listener.queue_name == QUEUE
    assert start_match_listener.options["max_retries"] == 0
    [time_limit] = [m for m in current().broker.middleware if isinstance(m, TimeLimit)]
    message = start_message(StartMessage(match_id="m", message_id=new_message_id("m")))
    actor = current().broker.get_actor(message.actor_name)
    limit = message.options.get("time_limit") or actor.options.get("time_limit", time_limit.time_limit)
    assert limit == float("inf")
    # The other listener actors keep the default limit.
    dispatch_actor = current().broker.get_actor("dispatch_upcoming_match_listeners")
    assert "time_limit" not in dispatch_actor.options
