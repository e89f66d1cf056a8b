"""The three Dramatiq internals kickoff still relies on, in one place, checked when this module is imported.

Everything else kickoff does with Dramatiq goes through its public API. What is left, each with
the upstream issue whose resolution would remove it:

1. **The RedisBroker's enqueue internals**, for actors.batch's one-round-trip batch: Dramatiq has
   no batch enqueue, and its ``enqueue`` is one Lua script call per message, several times slower
   for ten thousand starts. ``pipelined`` gives a copy of the broker whose ``client`` is a redis-py
   pipeline and whose ``scripts["dispatch"]`` is registered on it (``enqueue`` looks the script up
   on each call), so the first message goes through Dramatiq's own ``enqueue``; ``store_messages``
   stores every other one as that script does: the storage layout (``{namespace}:{queue}``, the
   list of message ids, and ``{namespace}:{queue}.msgs``, the hash of bodies by id), each message
   under its ``redis_message_id`` option. The same layout, with the ack sets
   (``{namespace}:__acks__.{broker_id}.{queue}``: what a process fetched and has not acked), lets a
   reaper requeue at once what a dead listener worker had fetched (``requeue_fetched_by_leases``,
   actors.fetched_starts), which Dramatiq's maintenance does only after its heartbeat timeout.
   Upstream: see ``UPSTREAM`` (each internal's issue or pull request).
2. **``RabbitmqBroker._build_queue_arguments``**, extended by actors.rabbitmq to declare quorum
   queues (``x-queue-type``): the broker has no public way to add queue arguments.
3. **A RabbitMQ delivery's ``_tag``** (``_RabbitmqMessage``): actors.rabbitmq's consumer hands a
   delivery back with ``basic_nack(requeue=True)`` when the worker is full, which Dramatiq's
   consumer cannot do (its ``nack`` dead-letters).

The RabbitMQ consumer class kickoff extends is the one ``RabbitmqBroker.consumer_class``
returns (the property Dramatiq's own ``consume`` builds consumers with), and a delivery's stored
message is read through the proxy's public attributes, so neither needs a private name.

Importing this module checks the names of 1. (``client``, ``scripts`` and the ``redis_message_id``
option in the RedisBroker's source), 2. and 3. against the installed dramatiq and raises
ImportError naming its version and what differs; 1.'s storage layout is checked by a test that
stores a batch and one ``enqueue`` side by side (tests/lifecycle/test_batch_send.py), its ack sets by
one that finds a consumer's fetched messages there (tests/lifecycle/test_fetched_starts.py). Checked
against dramatiq 1.17 and 2.2.
"""

from __future__ import annotations

import copy
import inspect
import json
from collections.abc import Sequence
from typing import Any

import dramatiq
from dramatiq.brokers.rabbitmq import RabbitmqBroker
from dramatiq.brokers.redis import RedisBroker
from dramatiq.encoder import JSONEncoder

#: The upstream issues that would let kickoff drop each internal (see the module's docstring).
UPSTREAM = {
    # a faster way to enqueue many messages; closed without a batch API (none is open)
    "RedisBroker enqueue": "https://github.com/Bogdanp/dramatiq/issues/170",
    # custom arguments for the RabbitMQ queues (open pull request)
    "_build_queue_arguments": "https://github.com/Bogdanp/dramatiq/pull/657",
    # a delivery's AMQP details only reachable by overriding the consumer and its message (open)
    "_tag": "https://github.com/Bogdanp/dramatiq/issues/404",
}
#: What dramatiq's ``JSONEncoder.encode`` does (``json.dumps`` with these separators), with one
#: encoder object instead of one per call.
_JSON = json.JSONEncoder(separators=(",", ":"))


def _source(function: Any) -> str:
    try:
        return inspect.getsource(function) if function is not None else ""
    except (OSError, TypeError):
        return ""


def _consumer_class() -> Any:
    """The class ``RabbitmqBroker.consumer_class`` returns (the property does not use its instance)."""
    prop = inspect.getattr_static(RabbitmqBroker, "consumer_class", None)
    getter = getattr(prop, "fget", None)
    return getter(None) if getter is not None else None


#: What the RedisBroker's source must say for ``pipelined`` and ``store_messages`` to hold: the
#: scripts registered on its ``client`` by name, the dispatch script looked up on each call, each
#: message stored under its ``redis_message_id`` option.
_REDIS_BROKER_SOURCE = ("self.client", "self.scripts = {", "register_script", 'self.scripts["dispatch"]')
_REDIS_MESSAGE_ID = "redis_message_id"


def _check() -> list[str]:
    """What differs from the internals used here (the storage layout is checked by a test that
    compares a batch with what one ``enqueue`` stores, tests/lifecycle/test_batch_send.py)."""
    problems: list[str] = []
    redis_broker = _source(RedisBroker)
    problems += [f"RedisBroker: {text}" for text in _REDIS_BROKER_SOURCE if text not in redis_broker]
    if f'"{_REDIS_MESSAGE_ID}"' not in _source(getattr(RedisBroker, "enqueue", None)):
        problems.append(f"RedisBroker.enqueue: {_REDIS_MESSAGE_ID}")
    if not callable(getattr(RabbitmqBroker, "_build_queue_arguments", None)):
        problems.append("RabbitmqBroker._build_queue_arguments")
    consumer = _consumer_class()
    if consumer is None:
        problems.append("RabbitmqBroker.consumer_class")
    elif "message._tag" not in _source(getattr(consumer, "ack", None)):
        problems.append("the RabbitMQ consumer's ack: message._tag")
    sample = {"args": [], "kwargs": {"a": "\u00e9"}}
    if JSONEncoder().encode(sample) != _JSON.encode(sample).encode("utf-8"):
        problems.append("JSONEncoder.encode")
    return problems


def check() -> None:
    """Raise ImportError naming the installed dramatiq when one of the internals differs."""
    problems = _check()
    if problems:
        raise ImportError(
            f"dramatiq {dramatiq.__version__} differs from what kickoff's brokers use: "
            f"{'; '.join(problems)}; install a dramatiq version kickoff supports (see pyproject.toml)"
        )


check()

#: The RabbitmqBroker's consumer, which actors.rabbitmq extends (``RabbitmqBroker.consumer_class``).
RabbitmqConsumer: type = _consumer_class()


# -- 1. the RedisBroker's enqueue internals -------------------------------------------------------


def queue_key(broker: RedisBroker, queue_name: str) -> str:
    """The list of a queue's message ids."""
    return f"{broker.namespace}:{queue_name}"


def messages_key(broker: RedisBroker, queue_name: str) -> str:
    """The hash of a queue's message bodies by id."""
    return f"{queue_key(broker, queue_name)}.msgs"


def pipeline(broker: RedisBroker) -> Any:
    """A redis-py pipeline (no MULTI) on the broker's Redis client: one round trip when executed."""
    return broker.client.pipeline(transaction=False)


def pipelined(broker: RedisBroker, pipe: Any) -> RedisBroker:
    """A shallow copy of ``broker`` whose ``dispatch`` script is queued on ``pipe`` (the other
    scripts stay on the broker's client, so one that must answer at once, ``maxstack``, does)
    and that emits no middleware events (the caller emits them for its whole batch)."""
    view = copy.copy(broker)
    view.client = pipe
    script = broker.scripts["dispatch"].script
    view.scripts = {**broker.scripts, "dispatch": pipe.register_script(script)}
    view.middleware = []
    return view


def with_redis_message_id(message: dramatiq.Message, redis_id: str) -> dramatiq.Message:
    """``message`` with its Redis id (unique per enqueue, like the uuid4 ``RedisBroker.enqueue`` gives)."""
    return with_options(message, **{_REDIS_MESSAGE_ID: redis_id})


def store_messages(
    pipe: Any, broker: RedisBroker, queue_name: str, messages: Sequence[dramatiq.Message]
) -> None:
    """Queue on ``pipe`` what the dispatch script's ``enqueue`` stores for ``messages`` (each with its
    Redis id, ``with_redis_message_id``) on queue ``queue_name``: one HSET of their bodies by id,
    one RPUSH of their ids, in order."""
    ids = [m.options[_REDIS_MESSAGE_ID] for m in messages]
    pipe.hset(
        messages_key(broker, queue_name), mapping={i: encode(m) for i, m in zip(ids, messages, strict=True)}
    )
    pipe.rpush(queue_key(broker, queue_name), *ids)


# -- 1. (the storage layout) the starts a dead worker had fetched ---------------------------------

#: kickoff's record, in the broker's Redis, of the Dramatiq consumer (the RedisBroker's ``broker_id``)
#: of the process that holds a listener worker lease: ``{namespace}:kickoff_consumer_of.{lease id}``.
CONSUMER_OF_LEASE = "kickoff_consumer_of"

#: Requeue what the consumers of the given leases had fetched and not acked, as Dramatiq's own
#: maintenance does for a worker whose heartbeat is older than its timeout (``dispatch.lua``: each id
#: of ``{namespace}:__acks__.{broker_id}.{queue}`` whose body is still in ``{queue}.msgs`` pushed
#: back on ``{queue}``, the ack set deleted), at once and for these consumers only; their records go
#: too. ARGV: namespace, queue, the records' key prefix, lease ids. Returns the messages requeued.
_REQUEUE_FETCHED = """
local ns, queue, records = ARGV[1], ARGV[2], ARGV[3]
local queued, bodies = ns .. ":" .. queue, ns .. ":" .. queue .. ".msgs"
local n = 0
for i = 4, #ARGV do
  local record = records .. ARGV[i]
  local consumer = redis.call("get", record)
  if consumer then
    local acks = ns .. ":__acks__." .. consumer .. "." .. queue
    for _, id in ipairs(redis.call("smembers", acks)) do
      if redis.call("hexists", bodies, id) == 1 then
        redis.call("rpush", queued, id)
        n = n + 1
      end
    end
    redis.call("del", acks)
  end
  redis.call("del", record)
end
return n
"""


def fetched_key(broker: RedisBroker, consumer_id: str, queue_name: str) -> str:
    """The set of message ids a consumer fetched from a queue and has not acked yet."""
    return f"{broker.namespace}:__acks__.{consumer_id}.{queue_name}"


def consumer_id(broker: dramatiq.Broker) -> str | None:
    """The id under which this process's RedisBroker fetches (its ``broker_id``: its heartbeat and
    its ack sets); None for another broker (RabbitMQ requeues a closed channel's deliveries itself)."""
    return getattr(broker, "broker_id", None) if isinstance(broker, RedisBroker) else None


def _consumer_records(broker: RedisBroker) -> str:
    """The key prefix of the lease -> consumer records (the lease id follows)."""
    return f"{broker.namespace}:{CONSUMER_OF_LEASE}."


def record_consumer_of_lease(broker: RedisBroker, lease_id: str, *, ttl_seconds: float) -> None:
    """Record that the process holding ``lease_id`` fetches as this broker's consumer."""
    key = f"{_consumer_records(broker)}{lease_id}"
    broker.client.set(key, str(consumer_id(broker)), px=max(1, int(ttl_seconds * 1000)))


def requeue_fetched_by_leases(broker: RedisBroker, queue_name: str, lease_ids: Sequence[str]) -> int:
    """Put back on ``queue_name`` what the consumers of these (dead) workers' leases had fetched and not
    acked (``_REQUEUE_FETCHED``); the number of messages requeued."""
    if not lease_ids:
        return 0
    script = broker.client.register_script(_REQUEUE_FETCHED)
    return int(script(keys=[], args=[broker.namespace, queue_name, _consumer_records(broker), *lease_ids]))


# -- 2. queue arguments of the RabbitmqBroker ----------------------------------------------------


class QueueArgumentsHook:
    """Mixin of a RabbitmqBroker: ``queue_arguments(queue_name, arguments)`` returns the arguments
    of every queue the broker declares (its own, its delay and its dead-letter queue excepted)."""

    def queue_arguments(self, queue_name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        return arguments

    def _build_queue_arguments(self, queue_name: str) -> dict[str, Any]:
        arguments: dict[str, Any] = super()._build_queue_arguments(queue_name)  # type: ignore[misc]
        return self.queue_arguments(queue_name, arguments)


# -- 3. a RabbitMQ delivery's tag ------------------------------------------------------------------


def delivery_tag(message: Any) -> int:
    """The AMQP delivery tag of a message the RabbitMQ consumer delivered."""
    return message._tag


# -- public shortcuts (no internals: checked to give the bytes Dramatiq gives) ----------------------


def with_options(message: dramatiq.Message, **options: Any) -> dramatiq.Message:
    """``message.copy(options=options)`` without ``dataclasses.replace``'s per-call field introspection."""
    return dramatiq.Message(
        queue_name=message.queue_name,
        actor_name=message.actor_name,
        args=message.args,
        kwargs=message.kwargs,
        options={**message.options, **options},
        message_id=message.message_id,
        message_timestamp=message.message_timestamp,
    )


def encode(message: dramatiq.Message) -> bytes:
    """``message.encode()``: the same bytes, without ``Message.asdict``'s deep copy when the global
    encoder is Dramatiq's JSONEncoder (any other encoder is called as Dramatiq calls it)."""
    if type(dramatiq.get_encoder()) is not JSONEncoder:
        return message.encode()
    return _JSON.encode(
        {
            "queue_name": message.queue_name,
            "actor_name": message.actor_name,
            "args": message.args,
            "kwargs": message.kwargs,
            "options": message.options,
            "message_id": message.message_id,
            "message_timestamp": message.message_timestamp,
        }
    ).encode("utf-8")
