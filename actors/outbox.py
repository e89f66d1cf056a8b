"""The periodic outbox drain actor: publish due outbox rows, release or cancel held claims."""

from __future__ import annotations

import dramatiq

from actors import settings
from actors.broker import QUEUE_DEFAULT
from publisher.drain import drain_outbox_concurrently


@dramatiq.actor(queue_name=QUEUE_DEFAULT, max_retries=0)
def drain_outbox(max_seconds: float | None = None) -> dict:
    """Drain the activity outbox for at most OUTBOX_DRAIN_MAX_SECONDS with OUTBOX_DRAIN_WORKERS drains."""
    return drain_outbox_concurrently(settings=settings, max_seconds=max_seconds).as_json()
