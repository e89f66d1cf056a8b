"""Send many messages at once: one Redis round trip (RedisBroker), one confirmed batch (RabbitMQ).

RabbitMQ (actors.rabbitmq.publish_batch): every message published on one channel, then all
confirms awaited once.

Redis: Dramatiq's ``RedisBroker.enqueue`` runs its ``dispatch`` Lua script once per message (a worker
heartbeat ZADD, a chance of queue maintenance, then HSET of the message body and RPUSH of its id);
a dispatch tick sends up to tens of thousands of starts. This module runs that script for the
first message of a batch (heartbeat and maintenance chance, as one ``enqueue`` would) and stores
every other message the way the script's ``enqueue`` command does: per chunk of 1,000 messages one
HSET of the bodies into ``{namespace}:{queue}.msgs`` and one RPUSH of the ids onto
``{namespace}:{queue}``, in order, all in one pipeline. Each message's Redis id
(``redis_message_id``, unique per message like the broker's own uuid4) is one uuid4 per batch and
the message's position; the bodies are the bytes ``Message.encode`` gives, made without its
per-message generic steps (actors.dramatiq_compat.encode). The same before/after ``enqueue``
middleware events are emitted. The RedisBroker
internals this needs are in actors.dramatiq_compat (checked at import); any other broker falls
back to ``enqueue``.
"""

from __future__ import annotations

from uuid import uuid4

import dramatiq
from dramatiq.brokers.redis import RedisBroker
from dramatiq.middleware import Middleware

from actors import dramatiq_compat

#: Messages per HSET/RPUSH command (keeps one command's size bounded).
_CHUNK = 1000


def _supports_pipeline(broker: dramatiq.Broker) -> bool:
    return isinstance(broker, RedisBroker)


def _has_hook(broker: dramatiq.Broker, name: str) -> bool:
    """Whether any middleware does something on ``name`` (the base class's hooks do nothing)."""
    base = getattr(Middleware, name)
    return any(getattr(type(m), name, base) is not base or name in vars(m) for m in broker.middleware)


def enqueue_many(broker: dramatiq.Broker, messages: list[dramatiq.Message]) -> list[dramatiq.Message]:
    """Enqueue ``messages`` (no delay) and return them as enqueued."""
    if not messages:
        return []
    from actors.rabbitmq import KickoffRabbitmqBroker, publish_batch

    if isinstance(broker, KickoffRabbitmqBroker):
        publish_batch(broker, messages)
        return messages
    if not _supports_pipeline(broker):
        return [broker.enqueue(m) for m in messages]
    assert isinstance(broker, RedisBroker)
    batch_id = uuid4()
    enqueued = [
        dramatiq_compat.with_options(m, redis_message_id=f"{batch_id}.{n}") for n, m in enumerate(messages)
    ]
    if _has_hook(broker, "before_enqueue"):
        for message in enqueued:
            broker.emit_before("enqueue", message, None)
    first, rest = enqueued[0], enqueued[1:]
    pipe = broker.client.pipeline(transaction=False)
    dramatiq_compat.run_enqueue(broker, first, client=pipe)
    by_queue: dict[str, list[dramatiq.Message]] = {}
    for message in rest:
        by_queue.setdefault(message.queue_name, []).append(message)
    for queue_name, queued in by_queue.items():
        queue_key = dramatiq_compat.queue_key(broker, queue_name)
        messages_key = dramatiq_compat.messages_key(broker, queue_name)
        for n in range(0, len(queued), _CHUNK):
            chunk = queued[n : n + _CHUNK]
            ids = [m.options["redis_message_id"] for m in chunk]
            bodies = {i: dramatiq_compat.encode(m) for i, m in zip(ids, chunk, strict=True)}
            pipe.hset(messages_key, mapping=bodies)
            pipe.rpush(queue_key, *ids)
    pipe.execute()
    if _has_hook(broker, "after_enqueue"):
        for message in enqueued:
            broker.emit_after("enqueue", message, None)
    return enqueued
