"""Send many messages to the Dramatiq RedisBroker in one Redis round trip (a pipeline of its enqueue script).

Dramatiq's ``RedisBroker.enqueue`` makes one round trip per message; a dispatch tick sends up to
thousands of starts. This module runs the broker's own ``dispatch`` Lua script with the same
arguments ``enqueue`` uses, through one pipeline, and emits the same before/after middleware
events. It relies on RedisBroker internals (``scripts``, ``_should_do_maintenance``,
``_max_unpack_size``; checked against dramatiq 2.2); any other broker falls back to ``enqueue``.
"""

from __future__ import annotations

from uuid import uuid4

import dramatiq
from dramatiq.brokers.redis import RedisBroker
from dramatiq.common import current_millis


def _supports_pipeline(broker: dramatiq.Broker) -> bool:
    return isinstance(broker, RedisBroker) and all(
        hasattr(broker, name) for name in ("scripts", "_should_do_maintenance", "_max_unpack_size")
    )


def enqueue_many(broker: dramatiq.Broker, messages: list[dramatiq.Message]) -> list[dramatiq.Message]:
    """Enqueue ``messages`` (no delay) and return them as enqueued."""
    if not messages:
        return []
    if not _supports_pipeline(broker):
        return [broker.enqueue(m) for m in messages]
    assert isinstance(broker, RedisBroker)
    script = broker.scripts["dispatch"]
    pipe = broker.client.pipeline(transaction=False)
    enqueued = []
    for message in messages:
        message = message.copy(options={"redis_message_id": str(uuid4())})
        broker.emit_before("enqueue", message, None)
        args = [
            "enqueue",
            current_millis(),
            message.queue_name,
            broker.broker_id,
            broker.heartbeat_timeout,
            broker.dead_message_ttl,
            broker._should_do_maintenance("enqueue"),
            broker._max_unpack_size(),
            message.options["redis_message_id"],
            message.encode(),
        ]
        script(keys=[broker.namespace], args=args, client=pipe)
        enqueued.append(message)
    pipe.execute()
    for message in enqueued:
        broker.emit_after("enqueue", message, None)
    return enqueued
