"""The periodic outbox drain actor: publish due outbox rows, release or cancel held claims."""

from __future__ import annotations

import dramatiq

from actors import settings
from actors.broker import QUEUE_DEFAULT
from publisher.amqp import publisher_from_settings
from publisher.drain import drain_outbox as run_drain


@dramatiq.actor(queue_name=QUEUE_DEFAULT, max_retries=0)
def drain_outbox(max_seconds: float | None = None) -> dict:
    """Drain the activity outbox for at most OUTBOX_DRAIN_MAX_SECONDS (sent every minute)."""
    with publisher_from_settings(settings) as publisher:
        return run_drain(publisher=publisher, settings=settings, max_seconds=max_seconds).as_json()
