"""Archive actors: backfill a match's event log from the play-by-play when no listener runs it; its retention.

``backfill_match_archive`` runs on ``default`` (no retries: the sweep or an operator sends it
again; a match a listener owns meanwhile is left to it, logged). The sweep sends it through
``send_backfill`` when it abandons the last run of a match whose game is over.
"""

from __future__ import annotations

import logging

import dramatiq

from actors.actor_runtime import current
from actors.broker import QUEUE_DEFAULT, broker_errors
from lifecycle import archive_verify
from lifecycle.event_log_admin import prune_event_log as prune
from listener.errors import ArchiveBusy
from models.audit import Actor, AuditContext

logger = logging.getLogger(__name__)


@dramatiq.actor(queue_name=QUEUE_DEFAULT, max_retries=0)
def backfill_match_archive(match_id: str) -> dict:
    """Merge what the archive lacks from the play-by-play, verify, store the outcome (lifecycle)."""
    rt = current()
    try:
        result = archive_verify.backfill_match_archive(
            match_id, settings=rt.settings, coordination=rt.coordination
        )
    except ArchiveBusy as exc:  # a listener took the match meanwhile: it backfills its own gaps
        logger.warning("match %s archive backfill not run: %s", match_id, exc)
        return {"match_id": match_id, "refused": str(exc)}
    return {**result.as_dict(), "backfilled": result.backfilled}


def send_backfill(match_id: str) -> None:
    """Enqueue one backfill of ``match_id`` (BrokerUnavailable when the broker does not take it)."""
    broker = current().broker
    with broker_errors(broker):
        backfill_match_archive.send(str(match_id))


@dramatiq.actor(queue_name=QUEUE_DEFAULT, max_retries=0)
def prune_event_log() -> dict:
    """The event log's retention (EVENT_LOG_RETENTION_DAYS; off when empty): as ``kickoff events prune``,
    audited; a range with a live match is skipped until a later day. Returns what it did."""
    days = current().settings.event_log_retention_days
    if days is None:
        return {"skipped": "EVENT_LOG_RETENTION_DAYS is not set"}
    try:
        pruned = prune(
            days,
            audit=AuditContext(
                Actor(key_id=None, name="scheduler: prune_event_log"), "EVENT_LOG_RETENTION_DAYS"
            ),
        )
    except ArchiveBusy as exc:
        return {"skipped": str(exc), "days": days}
    return {"events": pruned.events, "partitions": list(pruned.partitions), "days": days}
