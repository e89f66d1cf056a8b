"""The store of a match's archive verification (``matches.archive_verified_at``, ``archive_verification``)."""

from __future__ import annotations

import uuid
from typing import Any

from config.clock import utcnow
from models import fence
from models.boundary import translate_database_errors
from models.db import connection_scope, database
from models.match import Match


@translate_database_errors
def write_archive_verification(
    match_id: uuid.UUID, stored: dict[str, Any], *, fence_token: int | None
) -> bool:
    """Store ``stored`` as match ``match_id``'s latest archive verification (on a connection of its
    own), refused once ``fence_token`` is not the match's newest (models.fence); whether it was written."""
    with connection_scope():
        return bool(
            Match.update(archive_verified_at=utcnow(), archive_verification=stored)
            .where(Match.id == match_id, fence.is_current(fence_token))
            .execute()
        )


#: One provider call per match this often, at most, through the API (POST .../archive/verify).
ARCHIVE_VERIFY_INTERVAL_SECONDS = 60


@translate_database_errors
def claim_archive_verification(match_id: uuid.UUID, *, interval_seconds: float) -> bool:
    """Claim match ``match_id``'s verification slot: False while one was claimed in ``interval_seconds``."""
    cursor = database.execute_sql(
        "UPDATE matches SET archive_verify_claimed_at = now() WHERE id = %s"
        " AND (archive_verify_claimed_at IS NULL"
        " OR archive_verify_claimed_at <= now() - make_interval(secs => %s)) RETURNING id",
        (match_id, interval_seconds),
    )
    return cursor.fetchone() is not None
