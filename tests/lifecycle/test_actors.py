"""The actor layer: a failed run is a failed Dramatiq message, a skip a successful one, the develop
dispatch passes is_test=True, and start_match_listener has no time limit."""

from __future__ import annotations

import json

import pytest

from listener.dispatch import request_start
from tests.lifecycle.conftest import wait_for
from tests.lifecycle.helpers import live_row, quick, rows_of

QUEUE = "match_listeners"


@pytest.fixture
def broker_keys(lifecycle_env):
    """The RedisBroker keys of this run: message ids still queued, and those dead-lettered."""
    from models.barriers import connect_redis

    client = connect_redis(lifecycle_env["BROKER_URL"])
    ns = lifecycle_env["BROKER_NAMESPACE"]

    def read(queue: str) -> tuple[set[str], set[str]]:
        def ids(key: str) -> set[str]:  # the hashes are keyed by the broker's own id: read the bodies
            return {json.loads(body)["message_id"] for body in client.hvals(key)}

        return ids(f"{ns}:{queue}.msgs"), ids(f"{ns}:{queue}.XQ.msgs")

    yield read
    for key in client.scan_iter(match=f"{ns}:*"):
        client.delete(key)


@pytest.mark.e2e
def test_a_failed_run_is_a_failed_message_and_a_skip_a_successful_one(
    make_match, lbarriers, start_worker, broker_keys
):
    from actors.listeners import send_start

    failing = make_match(listener_start_settings=quick(listener_force_exit_code=11))
    skipped = make_match()
    live_row(skipped)  # an active listener elsewhere: the start is skipped_active
    sent = {}
    for name, match in (("failing", failing), ("skipped", skipped)):
        message, _ = request_start(
            str(match.id), overrides=None, force=False, barriers=lbarriers, send=send_start
        )
        sent[name] = message.message_id
    worker = start_worker(threads=2)

    ours = set(sent.values())  # messages other tests left in the namespace do not count

    def settled() -> bool:
        queued, dead = broker_keys(QUEUE)
        return not (queued & ours) and sent["failing"] in dead

    wait_for(settled, timeout=120)
    queued, dead = broker_keys(QUEUE)
    assert not (queued & ours)
    assert dead & ours == {sent["failing"]}  # the failed run is a failed message (dead-lettered, no retry)
    assert sent["skipped"] not in dead  # the skip was acked: a successful message
    [row] = rows_of(failing)
    assert row.exit_code == 11 and lbarriers.attempts(failing.id) == 1
    assert "ListenerRunFailed" in worker.output() and "skipped_active" in worker.output()


def test_the_develop_dispatch_passes_is_test_true(make_match, broker_keys):
    from actors.listeners import dispatch_upcoming_test_match_listeners

    test_match = make_match(is_test=True)
    make_match(is_test=False)
    result = dispatch_upcoming_test_match_listeners.fn()
    assert result["match_ids"] == [str(test_match.id)] and result["enqueued"] == 1
    queued, _ = broker_keys(QUEUE)
    assert len(queued) == 1


def test_start_match_listener_has_no_time_limit_and_no_retries():
    """The broker's TimeLimit middleware reads an infinite limit for a start message."""
    from dramatiq.middleware import TimeLimit

    from actors.listeners import start_match_listener, start_message
    from actors.runtime import current
    from listener.dispatch import StartMessage, new_message_id

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
