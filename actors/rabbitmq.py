"""Dramatiq's RabbitmqBroker as kickoff uses it: durable (optionally quorum) queues, confirmed sends.

A start_match_listener message runs for a whole game, hours. RabbitMQ closes the channel of a
consumer that holds a delivery unacked longer than its ``consumer_timeout`` (30 minutes by
default) and then delivers every unacked message again. kickoff therefore *settles* a start early:
the listener acks its delivery as soon as the lifecycle has consumed the message (its revoked key
is set), and from then on the lifecycle row, the start lock and the worker lease own recovery, as
they do on the Redis broker. A worker killed before that point still has the delivery unacked, so
RabbitMQ gives the message to another worker, and the lifecycle treats that re-delivery exactly as
it treats the Redis broker's. A settled message that fails afterwards is copied to the queue's
dead-letter queue (``{queue}.XQ``), where a nack would have put it.

Enqueueing uses publisher confirms (``confirm_delivery=True``, mandatory); ``publish_batch`` sends
a dispatch tick's starts on one channel and then awaits all their confirms (publisher.amqp).
"""

from __future__ import annotations

import logging
import threading
from functools import partial
from typing import Any

import dramatiq
import pika
from dramatiq.brokers.rabbitmq import RabbitmqBroker
from dramatiq.common import dq_name, q_name, xq_name

from actors.draining import taking_starts
from actors.dramatiq_compat import QueueArgumentsHook, RabbitmqConsumer, delivery_tag, encode
from config.errors import BrokerUnavailable
from config.settings import mask_url
from publisher.amqp import AmqpPublisher, OutgoingMessage
from publisher.amqp_link import AmqpLink
from publisher.errors import MissingQueueError

logger = logging.getLogger(__name__)

#: Attribute set on a delivery's message proxy: the consumer that can settle it early.
_CONSUMER_ATTR = "_kickoff_consumer"
#: Attribute set on a message proxy once it was acked early (the worker's ack then does nothing).
_SETTLED_ATTR = "_kickoff_settled"


#: How long a full worker waits after handing a start back before it takes the next delivery.
FULL_BACKOFF_SECONDS = 0.5


class SettlingConsumer(RabbitmqConsumer):
    """Dramatiq's RabbitMQ consumer, plus ``settle``: ack a delivery before its actor returns.

    With a ``capacity`` (the worker's thread count), a delivery that arrives while ``capacity``
    messages are being processed is handed back to RabbitMQ at once (nack with requeue), so that a
    worker whose threads are all busy never sits on a start another worker could run; so is every
    delivery while the worker drains (a graceful shutdown: actors.broker ``stop_taking_starts``).
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.capacity: int | None = None
        self.in_flight = 0  # deliveries handed to the worker and not yet acked or nacked by it
        self._mu = threading.Lock()

    def __next__(self) -> Any:
        message = super().__next__()
        if message is None:
            return None
        with self._mu:
            full = self.capacity is not None and (self.in_flight >= self.capacity or not taking_starts())
            if not full:
                self.in_flight += 1
        if full:
            self.known_tags.discard(delivery_tag(message))
            self.channel.basic_nack(delivery_tag(message), requeue=True)
            self.connection.sleep(FULL_BACKOFF_SECONDS)
            return None
        setattr(message, _CONSUMER_ATTR, self)
        return message

    def _finished(self) -> None:
        with self._mu:
            self.in_flight = max(0, self.in_flight - 1)

    def settle(self, message: Any) -> None:
        """Ack ``message`` now (once); the worker's own ack or nack of it later does nothing more."""
        if getattr(message, _SETTLED_ATTR, False):
            return
        setattr(message, _SETTLED_ATTR, True)
        super().ack(message)

    def ack(self, message: Any) -> None:
        self._finished()
        if not getattr(message, _SETTLED_ATTR, False):
            super().ack(message)

    def nack(self, message: Any) -> None:
        self._finished()
        if not getattr(message, _SETTLED_ATTR, False):
            super().nack(message)
            return
        # Settled already: put a copy where RabbitMQ's dead-lettering of a nack would have put it.
        body = message.encode()  # the stored message, through the delivery proxy's attributes
        properties = pika.BasicProperties(delivery_mode=2)
        try:
            self.connection.add_callback_threadsafe(
                partial(self.channel.basic_publish, "", xq_name(self.queue_name), body, properties)
            )
        except Exception:
            logger.warning("message %s: dead-lettering after an early ack failed", message.message_id)


class KickoffRabbitmqBroker(QueueArgumentsHook, RabbitmqBroker):
    """RabbitmqBroker with confirmed sends, kickoff's consumer and quorum queues where asked.

    A consumer of an ``early_ack_queues`` queue prefetches one message and hands a delivery back
    while all the worker's threads are busy: its messages are acked early, so RabbitMQ's prefetch
    window no longer counts the running ones. ``heartbeat_seconds`` is the AMQP heartbeat: RabbitMQ
    takes back the deliveries of a worker silent for two of them (paused, cut off).
    """

    def __init__(
        self,
        *,
        url: str,
        quorum_queues: frozenset[str] = frozenset(),
        early_ack_queues: frozenset[str] = frozenset(),
        heartbeat_seconds: int | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(url=url, confirm_delivery=True, **kwargs)
        if heartbeat_seconds is not None:
            for parameters in self.parameters if isinstance(self.parameters, list) else [self.parameters]:
                parameters.heartbeat = heartbeat_seconds
        self.kickoff_url = url
        self.quorum_queues = quorum_queues
        self.early_ack_queues = early_ack_queues

    @property
    def consumer_class(self) -> type[SettlingConsumer]:
        return SettlingConsumer

    def consume(self, queue_name: str, prefetch: int = 1, timeout: int = 5000) -> Any:
        if queue_name not in self.early_ack_queues:
            return super().consume(queue_name, prefetch, timeout)
        consumer = super().consume(queue_name, 1, timeout)
        consumer.capacity = max(1, prefetch // 2)  # Dramatiq asks for 2 x --threads
        return consumer

    def queue_arguments(self, queue_name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        if q_name(queue_name) in self.quorum_queues:
            arguments["x-queue-type"] = "quorum"
        return arguments


def settle_early(message: Any) -> None:
    """Ack the delivery of ``message`` now when it came from RabbitMQ (nothing on other brokers)."""
    consumer = getattr(message, _CONSUMER_ATTR, None)
    if consumer is not None:
        consumer.settle(message)


#: How errors of the Dramatiq broker on RabbitMQ name the service.
RABBITMQ_SERVICE = "the Dramatiq broker (RabbitMQ)"


def unavailable(url: str, exc: BaseException) -> BrokerUnavailable:
    """The error of a RabbitMQ broker that refused or dropped a connection, naming BROKER_URL."""
    text = str(exc).strip().splitlines()
    return BrokerUnavailable(
        service=RABBITMQ_SERVICE,
        setting="BROKER_URL",
        address=mask_url(url),
        reason=text[0] if text else type(exc).__name__,
    )


def publish_batch(broker: KickoffRabbitmqBroker, messages: list[dramatiq.Message]) -> None:
    """Publish ``messages`` on one channel back to back, then await every confirm; raise if any failed.

    The broker declares each queue first (as its ``enqueue`` does); the before/after ``enqueue``
    middleware events are emitted around the batch.
    """
    for queue in dict.fromkeys(m.queue_name for m in messages):
        broker.declare_queue(queue, ensure=True)
    for message in messages:
        broker.emit_before("enqueue", message, None)
    outgoing = [
        OutgoingMessage(queue=m.queue_name, body={}, message_id=m.message_id, raw=encode(m)) for m in messages
    ]
    queues = {m.queue_name for m in messages}
    with AmqpPublisher(url=broker.kickoff_url, passive_queues=queues) as publisher:
        outcomes = publisher.publish_many(outgoing)
    errors = [o.error for o in outcomes if o.error is not None]
    if errors:
        raise unavailable(broker.kickoff_url, errors[0]) from errors[0]
    for message in messages:
        broker.emit_after("enqueue", message, None)


def queue_depths(url: str, queue: str) -> tuple[int, int, int]:
    """Ready messages of ``queue``, its delay queue and its dead-letter queue (passive declares).

    BrokerConnectionError (a BrokerUnavailable naming BROKER_URL) when RabbitMQ cannot be reached.
    """
    link = AmqpLink(url=url, setting="BROKER_URL", service=RABBITMQ_SERVICE, confirms=False)
    try:
        counts = []
        for name in (queue, dq_name(queue), xq_name(queue)):
            try:
                counts.append(link.declare(name, passive=True))
            except MissingQueueError:  # not declared yet: empty
                counts.append(0)
        return counts[0], counts[1], counts[2]
    finally:
        link.close()
