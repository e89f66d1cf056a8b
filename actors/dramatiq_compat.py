"""The Dramatiq broker internals kickoff relies on, in one place, checked when this module is imported.

actors.batch stores a batch of messages in one Redis round trip. For the first message it runs
the RedisBroker's own ``dispatch`` Lua script with the ``enqueue`` command (the worker heartbeat
and the maintenance chance of one ``enqueue``); the others are stored as that command stores
them. That needs the broker's private API: ``scripts["dispatch"]`` with its positional argument
order (command, timestamp, queue, broker id, heartbeat timeout, dead-message TTL, maintenance
flag, max unpack size, then the message id and body), ``_should_do_maintenance``,
``_max_unpack_size`` and the script's key layout (``{namespace}:{queue}`` list of ids,
``{namespace}:{queue}.msgs`` hash of bodies). It also builds and encodes messages without
Dramatiq's per-message generic paths (``Message.copy``, ``Message.asdict``), which needs
``Message``'s field list. Importing this module checks them against the installed dramatiq and
raises ImportError naming its version and what differs. Checked against dramatiq 1.17 and 2.2.

actors.rabbitmq's consumer extends the RabbitmqBroker's private ``_RabbitmqConsumer`` (its
``queue_name``, ``connection``, ``channel`` and ``known_tags``, acks by the delivery's ``_tag``),
relies on ``RabbitmqBroker.consume`` building ``self.consumer_class(...)``, reads a delivery's
encoded message (``MessageProxy._message``) and extends ``_build_queue_arguments``. The same
import checks those and gives them to actors.rabbitmq under public names here.
"""

from __future__ import annotations

import dataclasses
import inspect
import json
import re
from typing import Any

import dramatiq
from dramatiq.broker import MessageProxy
from dramatiq.brokers import rabbitmq as rabbitmq_broker
from dramatiq.brokers import redis as redis_broker
from dramatiq.brokers.redis import RedisBroker
from dramatiq.common import current_millis
from dramatiq.encoder import JSONEncoder

#: ``local <name> = ARGV[<n>]`` lines of dispatch.lua, in the order ``run_enqueue`` passes them.
_ARGV = (
    "command",
    "timestamp",
    "queue_name",
    "worker_id",
    "heartbeat_timeout",
    "dead_message_ttl",
    "do_maintenance",
    "max_unpack_size",
)
#: What dispatch.lua must say for the key layout and the enqueue command used here.
_LUA_LINES = (
    'local queue_full_name = namespace .. ":" .. queue_name',
    'local queue_messages = queue_full_name .. ".msgs"',
    "local message_id = ARGS[1]",
    "local message_data = ARGS[2]",
    'redis.call("hset", queue_messages, message_id, message_data)',
    'redis.call("rpush", queue_full_name, message_id)',
)
#: ``dramatiq.Message``'s fields, in the order ``Message.asdict`` (and so its encoding) lists them.
_MESSAGE_FIELDS = (
    "queue_name",
    "actor_name",
    "args",
    "kwargs",
    "options",
    "message_id",
    "message_timestamp",
)
#: What dramatiq's ``JSONEncoder.encode`` does (``json.dumps`` with these separators), with one
#: encoder object instead of one per call.
_JSON = json.JSONEncoder(separators=(",", ":"))


#: Source fragments the RabbitMQ consumer relies on, by the function that must contain them.
_RABBITMQ_SOURCE = {
    "RabbitmqBroker.consume": ("self.consumer_class(",),
    "_RabbitmqConsumer.__init__": ("self.queue_name", "self.connection", "self.channel", "self.known_tags"),
    "_RabbitmqConsumer.ack": ("message._tag",),
    "_RabbitmqMessage.__init__": ("self._tag = tag",),
    "MessageProxy.__init__": ("self._message = message",),
}


def _rabbitmq_problems() -> list[str]:
    owners = {
        "RabbitmqBroker": getattr(rabbitmq_broker, "RabbitmqBroker", None),
        "_RabbitmqConsumer": getattr(rabbitmq_broker, "_RabbitmqConsumer", None),
        "_RabbitmqMessage": getattr(rabbitmq_broker, "_RabbitmqMessage", None),
        "MessageProxy": MessageProxy,
    }
    problems = [name for name, owner in owners.items() if owner is None]
    for where, fragments in _RABBITMQ_SOURCE.items():
        owner_name, _, function_name = where.partition(".")
        function = getattr(owners[owner_name], function_name, None)
        try:
            source = inspect.getsource(function) if function is not None else ""
        except (OSError, TypeError):
            source = ""
        problems += [f"{where}: {fragment}" for fragment in fragments if fragment not in source]
    broker = owners["RabbitmqBroker"]
    problems += [
        f"RabbitmqBroker.{name}"
        for name in ("consumer_class", "_build_queue_arguments")
        if broker is not None and not hasattr(broker, name)
    ]
    return problems


def _check() -> None:
    problems = [
        f"RedisBroker.{name}"
        for name in ("_should_do_maintenance", "_max_unpack_size")
        if not callable(getattr(RedisBroker, name, None))
    ]
    fields = tuple(f.name for f in dataclasses.fields(dramatiq.Message))
    if fields != _MESSAGE_FIELDS:
        problems.append(f"Message fields {fields}")
    sample = {"args": [], "kwargs": {"a": "\u00e9"}}
    if JSONEncoder().encode(sample) != _JSON.encode(sample).encode("utf-8"):
        problems.append("JSONEncoder.encode")
    source = getattr(redis_broker, "_scripts", {}).get("dispatch")
    if source is None:
        problems.append("the dispatch script")
    else:
        lua = source.decode() if isinstance(source, bytes) else str(source)
        for n, name in enumerate(_ARGV, start=1):
            if not re.search(rf"local {name}\s*=\s*ARGV\[{n}\]", lua):
                problems.append(f"dispatch.lua ARGV[{n}] = {name}")
        problems += [f"dispatch.lua: {line}" for line in _LUA_LINES if line not in lua]
    problems += _rabbitmq_problems()
    if problems:
        raise ImportError(
            f"dramatiq {dramatiq.__version__} differs from what kickoff's brokers use: "
            f"{'; '.join(problems)}; install a dramatiq version kickoff supports (see pyproject.toml)"
        )


_check()

#: The RabbitmqBroker's consumer, which actors.rabbitmq extends.
RabbitmqConsumer = rabbitmq_broker._RabbitmqConsumer


def delivery_tag(message: Any) -> int:
    """The AMQP delivery tag of a message the RabbitMQ consumer delivered."""
    return message._tag


def encoded_message(message: Any) -> bytes:
    """A delivered message as the broker stored it (its body, to publish again)."""
    return message._message.encode()


def queue_key(broker: RedisBroker, queue_name: str) -> str:
    """The list of a queue's message ids."""
    return f"{broker.namespace}:{queue_name}"


def messages_key(broker: RedisBroker, queue_name: str) -> str:
    """The hash of a queue's message bodies by id."""
    return f"{queue_key(broker, queue_name)}.msgs"


def run_enqueue(broker: RedisBroker, message: dramatiq.Message, *, client: Any) -> None:
    """Run the broker's dispatch script for one ``enqueue`` of ``message`` on ``client`` (a pipeline)."""
    broker.scripts["dispatch"](
        keys=[broker.namespace],
        args=[
            "enqueue",
            current_millis(),
            message.queue_name,
            broker.broker_id,
            broker.heartbeat_timeout,
            broker.dead_message_ttl,
            broker._should_do_maintenance("enqueue"),
            broker._max_unpack_size(),
            message.options["redis_message_id"],
            encode(message),
        ],
        client=client,
    )


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
    """``message.encode()``: the same bytes, without ``Message.asdict`` when the global encoder is
    Dramatiq's JSONEncoder (any other encoder is called as Dramatiq calls it)."""
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
