"""The launcher's job_runs consumer: a pika connection with manual acks and a prefetch limit."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pika
import pika.exceptions

from config.errors import BrokerConnectionError, MissingQueueError
from config.settings import mask_url
from publisher.amqp import PIKA_ERRORS, close_within
from publisher.queues import JOB_RUNS

logger = logging.getLogger(__name__)

CLOSE_TIMEOUT_SECONDS = 5.0


@dataclass(frozen=True)
class Delivery:
    """One job_runs delivery handed to the launcher: its body and a way to settle it."""

    body: bytes
    message_id: str | None
    redelivered: bool
    ack: Callable[[], None]
    nack: Callable[[], None]  # requeue: another consumer (or this one later) gets it again


def _reason(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


@dataclass(kw_only=True, eq=False, repr=False)
class RunConsumer:
    """Consumes ``queue`` (job_runs) with manual acks; ``poll`` hands deliveries to ``on_delivery``.

    pika errors become BrokerConnectionError; after one, ``poll`` reconnects on its next call.
    """

    url: str
    on_delivery: Callable[[Delivery], None]
    prefetch: int
    queue: str = JOB_RUNS
    heartbeat: int = 30

    def __post_init__(self) -> None:
        self._connection: pika.BlockingConnection | None = None
        self._channel: Any = None

    def _unavailable(self, exc: BaseException) -> BrokerConnectionError:
        return BrokerConnectionError(
            service="RabbitMQ", setting="AMQP_URL", address=mask_url(self.url), reason=_reason(exc)
        )

    @property
    def connected(self) -> bool:
        return self._connection is not None and self._connection.is_open

    def connect(self) -> None:
        """Open the connection, check the queue exists (passive) and start consuming."""
        params = pika.URLParameters(self.url)
        params.heartbeat = self.heartbeat
        params.connection_attempts = 1
        params.socket_timeout = 5
        try:
            self._connection = pika.BlockingConnection(params)
            channel = self._connection.channel()
            channel.queue_declare(queue=self.queue, passive=True)
            channel.basic_qos(prefetch_count=self.prefetch)
            channel.basic_consume(queue=self.queue, on_message_callback=self._on_message, auto_ack=False)
        except pika.exceptions.ChannelClosedByBroker as exc:
            self.close()
            if exc.reply_code == 404:
                raise MissingQueueError(self.queue, exc.reply_text) from exc
            raise self._unavailable(exc) from exc
        except PIKA_ERRORS as exc:
            self.close(broken=True)
            raise self._unavailable(exc) from exc
        self._channel = channel
        logger.info("consuming %s (prefetch %s)", self.queue, self.prefetch)

    def _on_message(self, channel: Any, method: Any, properties: Any, body: bytes) -> None:
        tag = method.delivery_tag
        delivery = Delivery(
            body=body,
            message_id=getattr(properties, "message_id", None),
            redelivered=bool(method.redelivered),
            ack=lambda: channel.basic_ack(delivery_tag=tag),
            nack=lambda: channel.basic_nack(delivery_tag=tag, requeue=True),
        )
        self.on_delivery(delivery)

    def poll(self, timeout: float) -> None:
        """Wait up to ``timeout`` seconds for deliveries and hand each to ``on_delivery``."""
        if not self.connected:
            self.connect()
        try:
            assert self._connection is not None
            self._connection.process_data_events(time_limit=timeout)
        except PIKA_ERRORS as exc:
            self.close(broken=True)
            raise self._unavailable(exc) from exc

    def close(self, *, broken: bool = False) -> None:
        """Close the connection; unacked deliveries go back to the queue.

        A ``broken`` connection is shut at once; a clean close waits at most
        CLOSE_TIMEOUT_SECONDS for the broker (a black-holed link never answers).
        """
        conn, self._connection, self._channel = self._connection, None, None
        if conn is not None and conn.is_open:
            close_within(conn, 0.0 if broken else CLOSE_TIMEOUT_SECONDS)
