"""``kickoff dead-letters``: list, retry (sent again, the start path for starts) and purge."""

from __future__ import annotations

import json
import time

import dramatiq
import pytest

from models.coordination import connect_redis


@pytest.fixture
def dead_letter(lifecycle_env, broker_queues):
    """``dead_letter(actor, queue, **kwargs)``: put a message in the queue's dead-letter set."""
    client = connect_redis(lifecycle_env["BROKER_URL"])
    ns = lifecycle_env["BROKER_NAMESPACE"]

    def put(actor: str, queue: str, **kwargs: object) -> str:
        message = dramatiq.Message(queue_name=queue, actor_name=actor, args=(), kwargs=kwargs, options={})
        client.hset(f"{ns}:{queue}.XQ.msgs", message.message_id, message.encode())
        client.zadd(f"{ns}:{queue}.XQ", {message.message_id: time.time() * 1000})
        return message.message_id

    return put


def test_list_retry_and_purge_dead_letters(kick, dead_letter, broker_queues, make_match):
    assert kick("dead-letters", "list").output.strip() == "no dead-lettered messages"
    sweep = dead_letter("sweep_stale_match_listeners", "default", heartbeat_stale_seconds=0)
    match = make_match()
    start = dead_letter("start_match_listener", "match_listeners", match_id=str(match.id))
    other = dead_letter("sweep_stale_match_listeners", "default")
    listed = json.loads(kick("dead-letters", "list", "--json").output)
    assert listed["count"] == 3 and {m["message_id"] for m in listed["messages"]} == {sweep, start, other}
    table = kick("dead-letters", "list", "--queue", "default", "--limit", "1").output.strip().splitlines()
    assert table[0].split() == ["message_id", "queue", "actor", "dead_at", "kwargs"] and len(table) == 2

    retried = json.loads(kick("dead-letters", "retry", sweep, start, "--json").output)["retried"]
    assert [r["actor"] for r in retried] == ["sweep_stale_match_listeners", "start_match_listener"]
    assert all(r["new_message_id"] for r in retried)
    assert broker_queues("default") == 1 and broker_queues("match_listeners") == 1
    assert [
        m["message_id"] for m in json.loads(kick("dead-letters", "list", "--json").output)["messages"]
    ] == [other]

    out = kick("dead-letters", "retry", "nope", code=2).output
    assert out.strip() == "Error: no dead-lettered message nope (kickoff dead-letters list)"
    assert kick("dead-letters", "purge", code=2).output.strip().startswith("Error: give MESSAGE_ID")
    assert json.loads(kick("dead-letters", "purge", "--all", "--json").output) == {"purged": 1}
    assert json.loads(kick("dead-letters", "list", "--json").output)["count"] == 0
