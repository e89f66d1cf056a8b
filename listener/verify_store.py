"""Storing an archive verification on its Match row: ``archive_verified_at`` and ``archive_verification``.

The listener calls ``record_verification`` when a game is over (its last play-by-play compared
with the archive); ``kickoff matches verify-archive`` and the backfill job call it through
lifecycle.archive_verify. One UPDATE, on a short connection of its own (as the pipeline's writes),
refused when the listener run's fencing token is no longer the match's newest.
"""

from __future__ import annotations

import logging
import uuid

from listener.verify import LISTED_IDS, Verification
from models import fence
from models.verification import write_archive_verification

logger = logging.getLogger(__name__)


def record_verification(match_id: str, verification: Verification, *, fence_token: int | None = None) -> None:
    """Store ``verification`` (id lists cut to LISTED_IDS, with their counts) as the match's latest.

    ``fence_token``: the listener run's (models.fence); FencedWrite when a newer run took over.
    """
    stored = verification.as_dict(limit=LISTED_IDS)
    written = write_archive_verification(uuid.UUID(str(match_id)), stored, fence_token=fence_token)
    if not written and fence_token is not None:
        raise fence.refused(match_id, fence_token, "archive verification")
    logger.info(
        "match %s archive verification: %s (%d missing, %d extra, %d differing of %d events)",
        match_id,
        "ok" if verification.ok else "not ok",
        len(verification.missing),
        len(verification.extra),
        len(verification.differing),
        verification.events,
    )
