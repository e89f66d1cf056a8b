"""History: the every-minute rollup actor, and the recorder every worker process starts when it boots."""

from __future__ import annotations

import dramatiq

from actors.actor_runtime import current
from actors.broker import QUEUE_DEFAULT, worker_hooks
from config.clock import utcnow
from lifecycle.history import rollup_history as rollup
from models.history_recorder import recorder
from publisher.queues import TRIGGER_QUEUES


@dramatiq.actor(queue_name=QUEUE_DEFAULT, max_retries=0)
def rollup_history() -> dict:
    """Write this minute's history snapshots, derive the recent minutes again, prune past the retention."""
    rt = current()
    return rollup(
        settings=rt.settings, coordination=rt.coordination, queues=TRIGGER_QUEUES, now=utcnow()
    ).as_dict()


def start_recorder(_worker: dramatiq.Worker) -> None:
    """Once a worker process booted: count its history (a listener worker's events and gaps)."""
    settings = current().settings
    recorder.start(
        interval_seconds=settings.history_flush_seconds, max_pending=settings.history_max_pending_points
    )


def register_boot_hook() -> None:
    """Have every worker process of this broker start the history recorder once booted, and flush it
    at the start of its graceful shutdown."""
    hooks = worker_hooks(current().broker)
    if hooks is not None:
        hooks.register_boot(start_recorder)
        hooks.register(recorder.flush)


register_boot_hook()
