"""Send many messages at once: one Redis round trip (RedisBroker), one confirmed batch (RabbitMQ).

RabbitMQ (actors.rabbitmq.publish_batch): every message published on one channel, then all
confirms awaited once.

Redis: Dramatiq's ``RedisBroker.enqueue`` runs its ``dispatch`` Lua script once per message (a
worker heartbeat, a chance of queue maintenance, then the message stored); a dispatch tick sends
up to tens of thousands of starts. Here the first message of a batch goes through the broker's
own public ``enqueue``, on a view of the broker whose ``dispatch`` script runs on a redis-py
pipeline (``dramatiq_compat.pipelined``): the heartbeat and the maintenance chance are Dramatiq's
own. Every other message is stored the way that script's ``enqueue`` stores it, per chunk of
1,000 one HSET of the bodies and one RPUSH of the ids, in order, in the same pipeline
(``dramatiq_compat.store_messages``): one round trip. The broker internals this takes are in
actors.dramatiq_compat, with their upstream issue; this module uses only its functions. Each
message's Redis id (unique per message like the broker's own uuid4) is one uuid4 per batch and
the message's position; the bodies are the bytes ``Message.encode`` gives
(actors.dramatiq_compat.encode). The same before/after ``enqueue`` middleware events are
emitted, the after events once the pipeline ran. Any other broker gets ``enqueue`` per message.
"""

from __future__ import annotations

from uuid import uuid4

import dramatiq
from dramatiq.brokers.redis import RedisBroker
from dramatiq.middleware import Middleware

from actors import dramatiq_compat
from actors.middleware import TracingMiddleware
from actors.rabbitmq import KickoffRabbitmqBroker, publish_batch
from config import spans

#: Messages per HSET/RPUSH command (keeps one command's size bounded).
_CHUNK = 1000


def _has_hook(broker: dramatiq.Broker, name: str) -> bool:
    """Whether any middleware does something on ``name`` (the base class's hooks do nothing); the
    TracingMiddleware's ``before_enqueue`` is done for the whole batch at once here instead."""
    base = getattr(Middleware, name)
    return any(
        (getattr(type(m), name, base) is not base or name in vars(m)) and not isinstance(m, TracingMiddleware)
        for m in broker.middleware
    )


def enqueue_many(broker: dramatiq.Broker, messages: list[dramatiq.Message]) -> list[dramatiq.Message]:
    """Enqueue ``messages`` (no delay) and return them as enqueued."""
    if not messages:
        return []

    if isinstance(broker, KickoffRabbitmqBroker):
        publish_batch(broker, messages)
        return messages
    if not isinstance(broker, RedisBroker):
        return [broker.enqueue(m) for m in messages]
    headers = spans.headers_of()  # what TracingMiddleware.before_enqueue adds to each: one text per batch
    if headers:
        for message in messages:
            message.options.update(headers)
    batch_id = uuid4()
    rest = [
        dramatiq_compat.with_redis_message_id(m, f"{batch_id}.{n}")
        for n, m in enumerate(messages[1:], start=1)
    ]
    if _has_hook(broker, "before_enqueue"):
        for message in (messages[0], *rest):
            broker.emit_before("enqueue", message, None)
    pipe = dramatiq_compat.pipeline(broker)
    # the first through Dramatiq's own enqueue: its worker heartbeat and maintenance chance
    first = dramatiq_compat.pipelined(broker, pipe).enqueue(messages[0])
    enqueued = [first, *rest]
    by_queue: dict[str, list[dramatiq.Message]] = {}
    for message in rest:
        by_queue.setdefault(message.queue_name, []).append(message)
    for queue_name, queued in by_queue.items():
        for n in range(0, len(queued), _CHUNK):
            dramatiq_compat.store_messages(pipe, broker, queue_name, queued[n : n + _CHUNK])
    pipe.execute()
    if _has_hook(broker, "after_enqueue"):
        for message in enqueued:
            broker.emit_after("enqueue", message, None)
    return enqueued
