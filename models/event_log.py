"""The store of the match event log (``match_events``, its unique keys in ``match_event_keys``).

One row per distinct message of a match (its identity: ``listener.events.message_key``), written
only by ``insert_events``: one statement that locks each match row ``FOR SHARE``, keeps the rows
whose run's fencing token is still the match's newest (models.fence), inserts their keys
(``ON CONFLICT DO NOTHING``: a message already logged, by any host or run, is not logged again)
and the messages of the keys it inserted. A successor's ``take_token`` waits for the statement
(the share lock), so nothing of a stale run lands after its successor's first row.

Readers get a match's messages in arrival order (``messages_of``, ``pages_of``), its counts
(``log_summary``, ``event_counts``); ``prune_before`` drops what arrived before a day.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import psycopg2

from models.boundary import translate_database_errors
from models.db import connection_scope, database

#: Kinds of a logged row (the ``kind`` column's CHECK lists them).
KINDS = ("live", "resumed", "backfilled", "imported", "marker", "unreadable")
#: Rows one INSERT writes at most.
CHUNK = 1000
#: Rows one page of a reader fetches.
PAGE = 1000

_INSERT = """
WITH input AS (
    SELECT * FROM unnest(%(match)s::uuid[], %(key)s::text[], %(kind)s::text[], %(message)s::jsonb[],
                         %(raw)s::bytea[], %(record)s::uuid[], %(token)s::int8[], %(ord)s::int4[])
        AS t(match_id, message_key, kind, message, raw, record_id, fence_token, ord)
), locked AS (
    SELECT id, fence_token FROM matches WHERE id = ANY(%(matches)s::uuid[]) FOR SHARE
), allowed AS (
    SELECT DISTINCT ON (i.match_id, i.message_key) i.*
      FROM input i JOIN locked l ON l.id = i.match_id
     WHERE i.fence_token IS NULL OR i.fence_token >= l.fence_token
     ORDER BY i.match_id, i.message_key, i.ord
), keys AS (
    INSERT INTO match_event_keys (match_id, message_key)
    SELECT match_id, message_key FROM allowed
    ON CONFLICT DO NOTHING
    RETURNING match_id, message_key, arrived_at
), ins AS (
    INSERT INTO match_events (match_id, arrived_at, message_key, record_id, fence_token, kind, message, raw)
    SELECT a.match_id, k.arrived_at, a.message_key, a.record_id, a.fence_token, a.kind, a.message, a.raw
      FROM allowed a JOIN keys k USING (match_id, message_key)
     ORDER BY a.ord
    RETURNING match_id, message_key
)
SELECT 'logged', match_id::text, message_key FROM ins
UNION ALL
SELECT 'refused', i.match_id::text, i.message_key FROM input i
 WHERE NOT EXISTS (SELECT 1 FROM locked l WHERE l.id = i.match_id
                    AND (i.fence_token IS NULL OR i.fence_token >= l.fence_token))
"""

_PAGE = """
SELECT seq, arrived_at, kind, message::text, raw, record_id::text, fence_token
  FROM match_events WHERE match_id = %s AND seq > %s ORDER BY seq LIMIT %s
"""
_SUMMARY = "SELECT count(*), max(arrived_at) FROM match_events WHERE match_id = %s AND kind <> 'marker'"
_COUNTS = """
SELECT match_id::text, count(*) FILTER (WHERE kind <> 'marker'),
       count(*) FILTER (WHERE kind IN ('resumed', 'backfilled'))
  FROM match_events WHERE match_id = ANY(%s::uuid[]) GROUP BY match_id
"""


@dataclass(frozen=True)
class NewRow:
    """One message to log: its match, identity (text), kind, JSON text for jsonb, bytes kept as received."""

    match_id: str
    message_key: str
    kind: str
    message: str
    raw: bytes | None = None
    record_id: str | None = None
    fence_token: int | None = None


@dataclass(frozen=True)
class Outcome:
    """What one ``insert_events`` did: keys logged now, and keys refused (a newer run, or no such match)."""

    logged: frozenset[tuple[str, str]]
    refused: frozenset[tuple[str, str]]


@dataclass(frozen=True)
class LoggedRow:
    """One row of the log as readers get it."""

    seq: int
    arrived_at: datetime
    kind: str
    message: Any  # the parsed message (from ``raw`` when jsonb could not hold it)
    text: str  # the message's one-line JSON text as the export writes it
    record_id: str | None
    fence_token: int | None


def key_text(key: tuple[str, ...]) -> str:
    """A message identity as ``message_key`` holds it (ASCII JSON: no NUL reaches a text column)."""
    return json.dumps(list(key), separators=(",", ":"))


@translate_database_errors
def ensure_partitions(at: datetime) -> None:
    """Create the monthly partitions of ``at``'s month and the next one (kept when they exist)."""
    with connection_scope():
        database.execute_sql("SELECT kickoff_match_events_partition(%s)", (at,))
        database.execute_sql("SELECT kickoff_match_events_partition(%s + interval '1 month')", (at,))


@translate_database_errors
def insert_events(rows: Sequence[NewRow]) -> Outcome:
    """Log ``rows`` (fenced, de-duplicated; one statement per CHUNK rows, each committed on its own)."""
    logged: set[tuple[str, str]] = set()
    refused: set[tuple[str, str]] = set()
    with connection_scope():
        for start in range(0, len(rows), CHUNK):
            chunk = rows[start : start + CHUNK]
            params = {
                "match": [r.match_id for r in chunk],
                "key": [r.message_key for r in chunk],
                "kind": [r.kind for r in chunk],
                "message": [r.message for r in chunk],
                "raw": [psycopg2.Binary(r.raw) if r.raw is not None else None for r in chunk],
                "record": [r.record_id for r in chunk],
                "token": [r.fence_token for r in chunk],
                "ord": list(range(len(chunk))),
                "matches": sorted({r.match_id for r in chunk}),
            }
            with database.atomic():
                for what, match_id, key in database.execute_sql(_INSERT, params).fetchall():
                    (logged if what == "logged" else refused).add((match_id, key))
    return Outcome(logged=frozenset(logged), refused=frozenset(refused))


def _row(
    seq: int, arrived_at: datetime, kind: str, text: str, raw: Any, record: Any, token: Any
) -> LoggedRow:
    if raw is not None and kind != "unreadable":
        text = bytes(raw).decode("utf-8")
    message = json.loads(text)
    return LoggedRow(seq, arrived_at, kind, message, text, record, token)


@translate_database_errors
def page_of(match_id: uuid.UUID | str, *, after: int = 0, limit: int = PAGE) -> list[LoggedRow]:
    """The match's rows after ``seq`` ``after``, in arrival order, at most ``limit`` (the console's pages)."""
    with connection_scope():
        rows = database.execute_sql(_PAGE, (str(match_id), after, limit)).fetchall()
    return [_row(*row) for row in rows]


def pages_of(match_id: uuid.UUID | str) -> Iterator[list[LoggedRow]]:
    """Every row of the match, a page at a time (a connection per page: a stream never holds one)."""
    after = 0
    while True:
        page = page_of(match_id, after=after)
        if not page:
            return
        yield page
        after = page[-1].seq
        if len(page) < PAGE:
            return


def messages_of(match_id: uuid.UUID | str) -> list[Any]:
    """The match's logged messages in arrival order, as the file archive held them (kickoff's notes on
    recovered ones; markers included, unreadable lines left out)."""
    out: list[Any] = []
    for page in pages_of(match_id):
        for row in page:
            if row.kind == "unreadable":
                continue
            out.append(annotated(row))
    return out


def annotated(row: LoggedRow) -> Any:
    """The row's message with kickoff's note of where a recovered one came from (as the archive wrote it)."""
    source = {"resumed": "resume", "backfilled": "play_by_play"}.get(row.kind)
    if source is None or not isinstance(row.message, dict):
        return row.message
    return {**row.message, "kickoff": {"backfilled": source, "at": row.arrived_at.isoformat()}}


@dataclass(frozen=True)
class LogSummary:
    """A match's count of logged messages (markers left out) and when its last one arrived."""

    events: int
    last_arrived_at: datetime | None


@translate_database_errors
def log_summary(match_id: uuid.UUID | str) -> LogSummary:
    with connection_scope():
        events, last = database.execute_sql(_SUMMARY, (str(match_id),)).fetchone()
    return LogSummary(int(events), last)


@translate_database_errors
def event_counts(match_ids: Sequence[uuid.UUID | str]) -> dict[str, tuple[int, int]]:
    """Per match id: (messages logged, of which recovered by a resume or the play-by-play)."""
    if not match_ids:
        return {}
    with connection_scope():
        rows = database.execute_sql(_COUNTS, ([str(m) for m in match_ids],)).fetchall()
    return {mid: (int(n), int(rec)) for mid, n, rec in rows}


_LIVE_IN_RANGE = """
SELECT DISTINCT k.match_id::text FROM match_event_keys k JOIN matches m ON m.id = k.match_id
 WHERE k.arrived_at < %s
   AND (m.status = ANY(%s) OR EXISTS (SELECT 1 FROM match_listener_records r
                                       WHERE r.match_id = k.match_id AND r.ended_at IS NULL))
"""
_PARTITIONS = """
SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
 WHERE i.inhparent = 'match_events'::regclass AND c.relname ~ '^match_events_[0-9]{4}_[0-9]{2}$'
"""


@dataclass(frozen=True)
class Pruned:
    """What ``prune_before`` removed: messages, their keys, and the monthly partitions dropped whole."""

    events: int
    keys: int
    partitions: tuple[str, ...]


@translate_database_errors
def live_matches_before(cutoff: datetime) -> list[str]:
    """Matches with messages logged before ``cutoff`` that are live (a live or delayed status, or an
    open lifecycle row): a prune of that range must wait for them."""
    from models.status import DELAYED, LIVE

    with connection_scope():
        rows = database.execute_sql(_LIVE_IN_RANGE, (cutoff, sorted(LIVE | DELAYED))).fetchall()
    return [r[0] for r in rows]


def _month_end(name: str) -> datetime:
    from datetime import UTC

    year, month = int(name[-7:-3]), int(name[-2:])
    return datetime(year + month // 12, month % 12 + 1, 1, tzinfo=UTC)


@translate_database_errors
def prune_before(cutoff: datetime) -> Pruned:
    """Delete every message (and key) that arrived before ``cutoff``: a month wholly before it by
    dropping its partition, the rest row by row. One transaction."""
    with connection_scope(), database.atomic():
        names = sorted(r[0] for r in database.execute_sql(_PARTITIONS).fetchall())
        whole = [n for n in names if _month_end(n) <= cutoff]
        events = 0
        for name in whole:
            (n,) = database.execute_sql(f'SELECT count(*) FROM "{name}"').fetchone()
            events += int(n)
            database.execute_sql(f'DROP TABLE "{name}"')
        cursor = database.execute_sql("DELETE FROM match_events WHERE arrived_at < %s", (cutoff,))
        events += cursor.rowcount
        keys = database.execute_sql("DELETE FROM match_event_keys WHERE arrived_at < %s", (cutoff,)).rowcount
    return Pruned(events=events, keys=keys, partitions=tuple(whole))


@translate_database_errors
def match_names() -> list[tuple[str, str, str]]:
    """Every match as (id, sr_id, league name): what an import names its archive files after."""
    with connection_scope():
        rows = database.execute_sql(
            "SELECT m.id::text, m.sr_id, l.name FROM matches m JOIN leagues l ON l.id = m.league_id"
        ).fetchall()
    return [(r[0], r[1], r[2]) for r in rows]


@translate_database_errors
def total_events() -> int:
    """Messages in the whole log (a benchmark's counter; a sequential count, not for hot paths)."""
    with connection_scope():
        (n,) = database.execute_sql("SELECT count(*) FROM match_events").fetchone()
    return int(n)


#: A page of the match card's event list: newest first, each row with its event's type, id,
#: operation and version, and the arrival number of the version it replaces (the same event id's
#: row before it), so a correction or delete is shown against what it replaces.
_CARD_PAGE = """
SELECT seq, arrived_at, kind, message::text, raw, record_id::text, fence_token,
       event_type, event_id, operation, version, replaces_seq
  FROM (
    SELECT e.*,
           coalesce(e.message->'payload'->'event'->>'type',
                    e.message->'metadata'->>'event_category') AS event_type,
           e.message->'payload'->'event'->>'id' AS event_id,
           coalesce(e.message->'metadata'->>'operation', 'create') AS operation,
           coalesce(e.message->'payload'->'event'->>'updated_at',
                    e.message->'payload'->'event'->>'deleted') AS version,
           CASE WHEN e.message->'payload'->'event'->>'id' IS NOT NULL
                THEN lag(e.seq) OVER (PARTITION BY e.message->'payload'->'event'->>'id' ORDER BY e.seq)
           END AS replaces_seq
      FROM match_events e
     WHERE e.match_id = %(match)s
  ) t
 WHERE (%(before)s::int8 IS NULL OR seq < %(before)s::int8)
   AND (%(type)s::text IS NULL OR event_type = %(type)s::text)
 ORDER BY seq DESC
 LIMIT %(limit)s
"""
_CARD_TYPES = """
SELECT DISTINCT coalesce(message->'payload'->'event'->>'type', message->'metadata'->>'event_category')
  FROM match_events WHERE match_id = %s
"""


@dataclass(frozen=True)
class CardEvent:
    """One row of the match card's event list."""

    row: LoggedRow
    event_type: str | None
    event_id: str | None
    operation: str
    version: str | None
    replaces_seq: int | None  # the row of this event id before it (a correction or delete replaces it)


@translate_database_errors
def card_page(
    match_id: uuid.UUID | str, *, before: int | None = None, event_type: str | None = None, limit: int = 50
) -> list[CardEvent]:
    """The match's rows newest first, older than ``before`` (a seq), of ``event_type`` only if given."""
    params = {"match": str(match_id), "before": before, "type": event_type, "limit": limit}
    with connection_scope():
        rows = database.execute_sql(_CARD_PAGE, params).fetchall()
    return [
        CardEvent(_row(*r[:7]), r[7], r[8], r[9], r[10], None if r[11] is None else int(r[11])) for r in rows
    ]


@translate_database_errors
def card_types(match_id: uuid.UUID | str) -> list[str]:
    """The event types the match's log holds (the card's filter)."""
    with connection_scope():
        rows = database.execute_sql(_CARD_TYPES, (str(match_id),)).fetchall()
    return sorted(r[0] for r in rows if r[0])
