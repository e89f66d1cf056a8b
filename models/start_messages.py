"""The stored start message id of a match (``matches.start_message_id``): the one start allowed to run.

Every sender stores the Dramatiq message id of the start it sends before sending it; a start
whose message is not the stored one does nothing (a newer start replaced it, or an operator stop
forgot it). The id is forgotten when its start ends and by a stop. This module is the only one
that reads or writes the column.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence

from config.clock import utcnow
from models.boundary import translate_database_errors
from models.db import database
from models.match import Match

#: A start message id is ``start-match-listener.{match_id}.{uuid4}`` (dot-separated: both UUIDs
#: contain dashes).
MESSAGE_ID_PREFIX = "start-match-listener"


def new_message_id(match_id: str, suffix: uuid.UUID | None = None) -> str:
    """A start message id of ``match_id``: the given uuid4 (one batch's) or a fresh one."""
    return f"{MESSAGE_ID_PREFIX}.{match_id}.{suffix or uuid.uuid4()}"


#: One round trip, one implicit transaction. Sequential scans are off for this statement only:
#: with the default random_page_cost the planner hashes the whole matches table to join 1,000
#: ids (cost grows with the table); probing the primary key per id costs what the ids cost.
_SAVE_MESSAGE_IDS = (
    "SET LOCAL enable_seqscan = off; "
    "UPDATE matches AS m SET start_message_id = v.mid "
    "FROM unnest(%s::uuid[], %s::text[]) AS v (id, mid) WHERE m.id = v.id; "
    "RESET enable_seqscan"
)


#: The same join, with each id made in SQL from the batch's prefix and uuid4: the ids do not travel.
_STORE_NEW_MESSAGE_IDS = (
    "SET LOCAL enable_seqscan = off; "
    "UPDATE matches AS m SET start_message_id = %s || '.' || v.id::text || '.' || %s "
    "FROM unnest(%s::uuid[]) AS v (id) WHERE m.id = v.id; "
    "RESET enable_seqscan"
)


@translate_database_errors
def store_new_message_ids(match_ids: Sequence[str]) -> list[str]:
    """Give each of ``match_ids`` a fresh start message id, store them (one UPDATE), return them in order.

    ``match_ids`` are distinct and in PostgreSQL's text form of a uuid (as the dispatch selection
    returns them). One uuid4 serves the whole batch: each id is unique all the same (one per match,
    and no other batch has that uuid4), and a tick of 10,000 starts neither makes 10,000 uuid4s
    nor sends 10,000 ids to PostgreSQL (it builds them, as ``new_message_id`` does here).
    """
    if not match_ids:
        return []
    suffix = uuid.uuid4()
    database.execute_sql(_STORE_NEW_MESSAGE_IDS, (MESSAGE_ID_PREFIX, str(suffix), list(match_ids)))
    return [new_message_id(m, suffix) for m in match_ids]


@translate_database_errors
def save_message_ids(pairs: Sequence[tuple[str, str]]) -> None:
    """Store each ``(match_id, message_id)`` (one UPDATE).

    The update touches no indexed column, so on pages with room (``matches`` has fillfactor
    70) it is a HOT update and adds no index entries.
    """
    if not pairs:
        return
    database.execute_sql(_SAVE_MESSAGE_IDS, ([p[0] for p in pairs], [p[1] for p in pairs]))


@translate_database_errors
def stored_message_ids(match_ids: Sequence[str]) -> dict[str, str | None]:
    """The stored start message id of each of ``match_ids`` (one query)."""
    if not match_ids:
        return {}
    query = Match.select(Match.id, Match.start_message_id).where(
        Match.id.in_([uuid.UUID(m) for m in match_ids])
    )
    return {str(mid): message_id for mid, message_id in query.tuples()}


def stored_message_id(match_id: str) -> str | None:
    """The stored start message id of one match."""
    return stored_message_ids([match_id]).get(str(uuid.UUID(match_id)))


@translate_database_errors
def forget_message_id(match_id: str, message_id: str) -> None:
    """Clear the stored message id if it is still ``message_id`` (compare-and-set)."""
    Match.update(start_message_id=None).where(
        Match.id == uuid.UUID(match_id), Match.start_message_id == message_id
    ).execute()


@translate_database_errors
def stop_dispatch(match_id: str) -> None:
    """Turn the match's auto-dispatch off and forget its stored message id (an operator stop)."""
    Match.update(auto_dispatch_listener=False, start_message_id=None, updated_at=utcnow()).where(
        Match.id == uuid.UUID(match_id)
    ).execute()
