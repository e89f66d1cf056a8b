"""The /readyz answer kept for a moment: one round of service probes at a time, one AMQP connection reused.

A load balancer, a monitor and an operator may all ask /readyz every second; each round of probes
costs a PostgreSQL, a Redis and an AMQP round trip. ``Readiness`` keeps the last answer for
``ttl_seconds`` (concurrent callers wait for the round under way and share it) and gives the
RabbitMQ probe one publisher that it keeps (its connection is reopened when the broker dropped
it), instead of a new AMQP connection per call.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Generic, TypeVar

from publisher.amqp import publisher_from_settings

if TYPE_CHECKING:
    from config.settings import KickoffSettings
    from publisher.amqp import AmqpPublisher

T = TypeVar("T")

#: How long one /readyz answer is kept.
READINESS_TTL_SECONDS = 2.0


class Readiness(Generic[T]):
    """The last answer of ``probe`` for ``ttl_seconds``, and the probes' AMQP publisher."""

    def __init__(self, *, settings: KickoffSettings, ttl_seconds: float = READINESS_TTL_SECONDS) -> None:
        self.settings = settings
        self.ttl_seconds = ttl_seconds
        self._lock = threading.Lock()
        self._answered_at = -math.inf
        self._answer: T | None = None
        self._publisher: AmqpPublisher | None = None

    def answer(self, probe: Callable[[], T], *, on_probe: Callable[[], None] = lambda: None) -> T:
        """The kept answer while it is fresh, else ``probe()`` (run by one caller at a time)."""
        with self._lock:
            if self._answer is None or time.monotonic() - self._answered_at >= self.ttl_seconds:
                self._answer = probe()
                self._answered_at = time.monotonic()
                on_probe()
            return self._answer

    def publisher(self) -> AmqpPublisher:
        """The probes' publisher on AMQP_URL (only used under the probe lock, so by one thread at a time)."""
        if self._publisher is None:
            self._publisher = publisher_from_settings(self.settings)
        return self._publisher

    def close(self) -> None:
        """Close the probes' AMQP connection."""
        with self._lock:
            pub, self._publisher = self._publisher, None
        if pub is not None:
            pub.close()
