"""Archive actors: backfill a match's archive from the play-by-play when no listener runs it.

``backfill_match_archive`` runs on ``default`` (no retries: the sweep or an operator sends it
again; a match a listener owns meanwhile is left to it, logged). The sweep sends it through
``send_backfill`` when it abandons the last run of a match whose game is over.
"""

from __future__ import annotations

import logging

import dramatiq

from actors.broker import QUEUE_DEFAULT, broker_errors
from actors.runtime import current
from config.errors import ArchiveBusy
from lifecycle import archive_verify

logger = logging.getLogger(__name__)


@dramatiq.actor(queue_name=QUEUE_DEFAULT, max_retries=0)
def backfill_match_archive(match_id: str) -> dict:
    """Merge what the archive lacks from the play-by-play, verify, store the outcome (lifecycle)."""
    rt = current()
    try:
        result = archive_verify.backfill_match_archive(match_id, settings=rt.settings, barriers=rt.barriers)
    except ArchiveBusy as exc:  # a listener took the match meanwhile: it backfills its own gaps
        logger.warning("match %s archive backfill not run: %s", match_id, exc)
        return {"match_id": match_id, "refused": str(exc)}
    return {**result.as_dict(), "backfilled": result.backfilled}


def send_backfill(match_id: str) -> None:
    """Enqueue one backfill of ``match_id`` (BrokerUnavailable when the broker does not take it)."""
    broker = current().broker
    with broker_errors(broker):
        backfill_match_archive.send(str(match_id))
