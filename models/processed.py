"""The processed watermark of a match's event log (``match_processed``) and what the log holds past it.

A listener run processes the messages it logs (Match.status rules, the question pipeline) after
their batch committed (listener.ingest). The watermark is the highest ``match_events.seq`` whose
processing committed: ``mark_processed`` advances it inside the caller's transaction, the one that
holds the processing's writes and the run's fence (models.fence.fenced), so it moves exactly when
those writes commit and never for a stale run. A run that starts reads ``unprocessed_pages``: the
messages past it (live, resumed, backfilled rows; not markers, unreadable lines or imports) that a
predecessor logged and then died before processing, and processes them first.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from models.boundary import translate_database_errors
from models.db import connection_scope, database
from models.event_log import PAGE, LoggedRow, annotated, logged_row

#: Kinds of logged rows a run processes (and so replays past the watermark).
PROCESSED_KINDS = ("live", "resumed", "backfilled")

#: The row of ``key`` is found from the match's newest rows back (``match_events (match_id, seq)``,
#: read backwards: the message being marked was logged moments ago; migration 0093 dropped the
#: index by key, whose entry per message the write path paid for).
_MARK = """
INSERT INTO match_processed AS p (match_id, seq, fence_token, processed_at)
SELECT %(match)s::uuid, e.seq, %(token)s, clock_timestamp()
  FROM match_events e
 WHERE e.match_id = %(match)s::uuid AND e.message_key = %(key)s
 ORDER BY e.seq DESC
 LIMIT 1
ON CONFLICT (match_id) DO UPDATE
   SET seq = GREATEST(p.seq, EXCLUDED.seq), fence_token = EXCLUDED.fence_token,
       processed_at = EXCLUDED.processed_at
"""
_SEQ = "SELECT seq FROM match_processed WHERE match_id = %s"
_PAST = """
SELECT seq, arrived_at, kind, message::text, raw, record_id::text, fence_token, message_key
  FROM match_events
 WHERE match_id = %s AND seq > %s AND kind = ANY(%s)
 ORDER BY seq LIMIT %s
"""


@dataclass(frozen=True)
class Unprocessed:
    """A logged message past the watermark: its row, its log key, the message as processing gets it
    (with kickoff's note of a recovered one, as when it was read)."""

    row: LoggedRow
    key: str
    message: Any


def mark_processed(match_id: uuid.UUID | str, *, key: str, fence_token: int | None) -> None:
    """Advance the match's watermark to the row of log key ``key`` (never back), in the caller's
    transaction: call it inside the fenced transaction that holds the processing's writes."""
    params = {"match": str(match_id), "key": key, "token": fence_token}
    database.execute_sql(_MARK, params)


@translate_database_errors
def processed_seq(match_id: uuid.UUID | str) -> int:
    """The match's watermark: the highest seq whose processing committed (0: none yet)."""
    with connection_scope():
        row = database.execute_sql(_SEQ, (str(match_id),)).fetchone()
    return 0 if row is None else int(row[0])


@translate_database_errors
def unprocessed_page(match_id: uuid.UUID | str, *, after: int, limit: int = PAGE) -> list[Unprocessed]:
    """The match's processed kinds of rows after seq ``after``, in arrival order, at most ``limit``."""
    with connection_scope():
        rows = database.execute_sql(_PAST, (str(match_id), after, list(PROCESSED_KINDS), limit)).fetchall()
    out = []
    for *fields, key in rows:
        logged = logged_row(*fields)
        out.append(Unprocessed(logged, key, annotated(logged)))
    return out


def unprocessed_pages(match_id: uuid.UUID | str, *, after: int) -> Iterator[list[Unprocessed]]:
    """Every message past seq ``after`` a page at a time (a connection per page)."""
    while True:
        page = unprocessed_page(match_id, after=after)
        if not page:
            return
        yield page
        after = page[-1].row.seq
        if len(page) < PAGE:
            return
