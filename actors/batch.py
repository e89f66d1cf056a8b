"""Send many messages at once: one Redis round trip (RedisBroker), one confirmed batch (RabbitMQ).

RabbitMQ (actors.rabbitmq.publish_batch): every message published on one channel, then all
confirms awaited once.

Redis: Dramatiq's ``RedisBroker.enqueue`` runs its ``dispatch`` Lua script once per message (a
worker heartbeat, a chance of queue maintenance, then the message stored); a dispatch tick sends
up to tens of thousands of starts. Here the first message of a batch goes through the broker's
own public ``enqueue``, on a view of the broker whose ``client`` is a redis-py pipeline and whose
``dispatch`` script is registered on it (``client.register_script``): the heartbeat and the
maintenance chance are Dramatiq's own. Every other message is stored the way that script's
``enqueue`` stores it, per chunk of 1,000 one HSET of the bodies and one RPUSH of the ids, in
order, in the same pipeline: one round trip. That storage layout is the one Dramatiq internal
left here (actors.dramatiq_compat, with its upstream issue). Each message's Redis id
(``redis_message_id``, unique per message like the broker's own uuid4) is one uuid4 per batch
and the message's position; the bodies are the bytes ``Message.encode`` gives
(actors.dramatiq_compat.encode). The same before/after ``enqueue`` middleware events are
emitted, the after events once the pipeline ran. Any other broker gets ``enqueue`` per message.
"""

from __future__ import annotations

import copy
from uuid import uuid4

import dramatiq
from dramatiq.brokers.redis import RedisBroker
from dramatiq.middleware import Middleware

from actors import dramatiq_compat

#: Messages per HSET/RPUSH command (keeps one command's size bounded).
_CHUNK = 1000


def _has_hook(broker: dramatiq.Broker, name: str) -> bool:
    """Whether any middleware does something on ``name`` (the base class's hooks do nothing)."""
    base = getattr(Middleware, name)
    return any(getattr(type(m), name, base) is not base or name in vars(m) for m in broker.middleware)


def _pipelined(broker: RedisBroker, pipe: object) -> RedisBroker:
    """A shallow copy of ``broker`` whose ``dispatch`` script is queued on ``pipe`` (the other
    scripts stay on the broker's client, so one that must answer at once, ``maxstack``, does)
    and that emits no middleware events (``enqueue_many`` emits them for the whole batch)."""
    view = copy.copy(broker)
    view.client = pipe
    script = broker.scripts["dispatch"].script
    view.scripts = {**broker.scripts, "dispatch": pipe.register_script(script)}  # type: ignore[attr-defined]
    view.middleware = []
    return view


def enqueue_many(broker: dramatiq.Broker, messages: list[dramatiq.Message]) -> list[dramatiq.Message]:
    """Enqueue ``messages`` (no delay) and return them as enqueued."""
    if not messages:
        return []
    from actors.rabbitmq import KickoffRabbitmqBroker, publish_batch

    if isinstance(broker, KickoffRabbitmqBroker):
        publish_batch(broker, messages)
        return messages
    if not isinstance(broker, RedisBroker):
        return [broker.enqueue(m) for m in messages]
    batch_id = uuid4()
    rest = [
        dramatiq_compat.with_options(m, redis_message_id=f"{batch_id}.{n}")
        for n, m in enumerate(messages[1:], start=1)
    ]
    if _has_hook(broker, "before_enqueue"):
        for message in (messages[0], *rest):
            broker.emit_before("enqueue", message, None)
    pipe = broker.client.pipeline(transaction=False)
    first = _pipelined(broker, pipe).enqueue(messages[0])  # Dramatiq's own: heartbeat, maintenance
    enqueued = [first, *rest]
    by_queue: dict[str, list[dramatiq.Message]] = {}
    for message in enqueued[1:]:
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
