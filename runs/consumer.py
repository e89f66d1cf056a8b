"""The launcher's job_runs consumer: manual acks and a prefetch limit on kickoff's AMQP transport."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from publisher.amqp_link import AmqpLink
from publisher.errors import BrokerConnectionError
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
    headers: dict[str, Any] = field(default_factory=dict)  # AMQP headers (``traceparent``: its publish span)


@dataclass(kw_only=True, eq=False, repr=False)
class RunConsumer:
    """Consumes ``queue`` (job_runs) with manual acks; ``poll`` hands deliveries to ``on_delivery``.

    The transport's errors are BrokerConnectionError (MissingQueueError for a queue that is not
    declared); after one, ``poll`` reconnects on its next call.
    """

    url: str
    on_delivery: Callable[[Delivery], None]
    prefetch: int
    queue: str = JOB_RUNS
    heartbeat: int = 30

    def __post_init__(self) -> None:
        self._link: AmqpLink | None = None

    @property
    def connected(self) -> bool:
        return self._link is not None and self._link.is_open

    def connect(self) -> None:
        """Open the connection, check the queue exists (passive) and start consuming."""
        self.close(broken=True)
        link = AmqpLink(url=self.url, confirms=False, heartbeat=self.heartbeat, connect_timeout=5.0)
        try:
            link.consume(self.queue, prefetch=self.prefetch, on_message=self._on_message)
        except Exception:
            link.abort()
            raise
        self._link = link
        logger.info("consuming %s (prefetch %s)", self.queue, self.prefetch)

    def _on_message(self, _channel: Any, method: Any, properties: Any, body: bytes) -> None:
        link = self._link
        assert link is not None
        tag = method.delivery_tag
        delivery = Delivery(
            body=body,
            message_id=getattr(properties, "message_id", None),
            redelivered=bool(method.redelivered),
            ack=lambda: link.ack(tag),
            nack=lambda: link.nack(tag),
            headers=dict(getattr(properties, "headers", None) or {}),
        )
        self.on_delivery(delivery)

    def poll(self, timeout: float) -> None:
        """Wait up to ``timeout`` seconds for deliveries and hand each to ``on_delivery``."""
        if not self.connected:
            self.connect()
        assert self._link is not None
        try:
            self._link.poll(timeout)
        except BrokerConnectionError:
            self.close(broken=True)
            raise

    def close(self, *, broken: bool = False) -> None:
        """Close the connection; unacked deliveries go back to the queue.

        A ``broken`` connection is shut at once; a clean close waits at most
        CLOSE_TIMEOUT_SECONDS for the broker (a black-holed link never answers).
        """
        link, self._link = self._link, None
        if link is not None:
            link.close(timeout=0.0 if broken else CLOSE_TIMEOUT_SECONDS)
