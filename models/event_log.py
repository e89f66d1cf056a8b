"""The store of the match event log (``match_events``, its unique keys in ``match_event_keys``).

One row per distinct message of a match (its identity: ``listener.events.message_key``), written
only by ``insert_events``: per batch one transaction whose statement (``_LOG``) locks each match
row ``FOR SHARE``, keeps the rows whose run's fencing token is still the match's newest
(models.fence), inserts their keys (``ON CONFLICT DO NOTHING``: a message already logged, by any
host or run, is not logged again) and the messages of the keys it inserted. A successor's
``take_token`` waits for the transaction (the share lock), so nothing of a stale run lands after
its successor's first row. A big batch reaches the statement by COPY into a staging table of the
session (``COPY_FROM``), a small one as the statement's array parameters.

Readers get a match's messages in arrival order (``messages_of``, ``pages_of``), its counts
(``log_summary``, ``event_counts``); ``prune_before`` drops what arrived before a day.
"""

from __future__ import annotations

import io
import json
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import peewee
import psycopg2

from models.boundary import translate_database_errors
from models.db import connection_scope, database
from models.fence import IDLE_SECONDS

#: Kinds of a logged row (the ``kind`` column's CHECK lists them).
KINDS = ("live", "resumed", "backfilled", "imported", "marker", "unreadable")
#: Rows one INSERT writes at most (the writer's batch: one statement, one commit).
CHUNK = 2000
#: Rows one page of a reader fetches.
PAGE = 1000

#: A batch of at least this many rows goes to PostgreSQL by COPY into a staging table (parsing
#: COPY's lines costs PostgreSQL less than a statement's array parameters); a smaller one, the
#: common case of a quiet process, in the statement itself (fewer round trips).
COPY_FROM = 100

#: The session's staging table of a batch sent by COPY (``ord``: the row's place in the batch),
#: emptied at each commit; made in the batch's transaction when missing (a pooler in transaction
#: mode may hand each transaction another server session).
_STAGE = """
SET LOCAL client_min_messages = warning;
SET LOCAL work_mem = '64MB';
CREATE TEMP TABLE IF NOT EXISTS event_log_batch (
    ord          INT8 NOT NULL,
    match_id     UUID NOT NULL,
    message_key  TEXT NOT NULL,
    kind         TEXT NOT NULL,
    message      JSONB NOT NULL,
    raw          BYTEA,
    record_id    UUID,
    fence_token  INT8
) ON COMMIT DELETE ROWS
"""
_COPY = (
    "COPY event_log_batch (ord, match_id, message_key, kind, message, raw, record_id, fence_token) FROM STDIN"
)
#: A small batch's rows, from the statement's array parameters.
_ARRAYS = """input AS (
    SELECT * FROM unnest(%(match)s::uuid[], %(key)s::text[], %(kind)s::text[], %(message)s::jsonb[],
                         %(raw)s::bytea[], %(record)s::uuid[], %(token)s::int8[])
        WITH ORDINALITY AS t(match_id, message_key, kind, message, raw, record_id, fence_token, ord)
), """
#: Logs a batch's rows (``{rows}``: the staging table or the arrays): locks their matches' rows FOR
#: SHARE (a successor's take_token waits for the commit), keeps the rows whose run's token is still
#: the match's newest, inserts their keys (a key already there, from any host or run, is skipped)
#: and the messages of the keys it inserted, in the batch's order. The batch holds each (match,
#: key) once. Returns the ``ord``s logged and the ``ord``s refused (a newer token, or no such match).
_LOG = """
WITH {arrays}locked AS (
    SELECT id, fence_token FROM matches WHERE id IN (SELECT match_id FROM {rows}) ORDER BY id FOR SHARE
), allowed AS (
    SELECT b.ord, b.match_id, b.message_key
      FROM {rows} b JOIN locked l ON l.id = b.match_id
     WHERE b.fence_token IS NULL OR b.fence_token >= l.fence_token
), keys AS (
    INSERT INTO match_event_keys (match_id, message_key)
    SELECT match_id, message_key FROM allowed ORDER BY ord
    ON CONFLICT DO NOTHING
    RETURNING match_id, message_key, arrived_at
), ins AS (
    INSERT INTO match_events (match_id, arrived_at, message_key, record_id, fence_token, kind, message, raw)
    SELECT b.match_id, k.arrived_at, b.message_key, b.record_id, b.fence_token, b.kind, b.message, b.raw
      FROM {rows} b JOIN keys k USING (match_id, message_key)
     ORDER BY b.ord
)
SELECT (SELECT array_agg(b.ord) FROM {rows} b JOIN keys k USING (match_id, message_key)),
       (SELECT array_agg(ord) FROM {rows} WHERE ord NOT IN (SELECT ord FROM allowed))
"""
# The insert holds its matches' rows FOR SHARE until its commit: a writer paused in between (SIGSTOP, a
# frozen host) must not keep them from a reaper's dispatch (it stores the start's message id on the
# match row) or its successor's fencing token for as long as it is paused, so PostgreSQL ends such a
# session after IDLE_SECONDS (as models.fence ``fenced`` does), in the same round trip as the insert.
_IDLE = f"SET LOCAL idle_in_transaction_session_timeout = '{IDLE_SECONDS}s';"
_LOG_STAGED = _IDLE + _LOG.format(arrays="", rows="event_log_batch")
_LOG_ARRAYS = _IDLE + _LOG.format(arrays=_ARRAYS, rows="input")

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


@dataclass(slots=True)
class NewRow:
    """One message to log: its match, identity (text), kind, JSON text for jsonb, bytes kept as received.

    Not changed once made (not frozen: a frozen dataclass's init costs the stream loop ~2 us a message)."""

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


#: Writes a message identity's JSON when a part is not a string (``json.dumps`` makes one per call).
_KEY_ENCODER = json.JSONEncoder(separators=(",", ":"))
#: A string as ASCII JSON, as ``json.dumps`` writes it (its C function: once per message, on the
#: stream loop's thread).
_ascii_json = json.encoder.encode_basestring_ascii


def key_text(key: tuple[str, ...]) -> str:
    """A message identity as ``message_key`` holds it: ``json.dumps(list(key), separators=(",", ":"))``
    (ASCII JSON: no NUL reaches a text column), text for text whatever version wrote a row."""
    if all(type(part) is str for part in key):
        return "[" + ",".join(map(_ascii_json, key)) + "]"
    return _KEY_ENCODER.encode(list(key))


@translate_database_errors
def ensure_partitions(at: datetime) -> None:
    """Create the monthly partitions of ``at``'s month and the next one (kept when they exist)."""
    with connection_scope():
        database.execute_sql("SELECT kickoff_match_events_partition(%s)", (at,))
        database.execute_sql("SELECT kickoff_match_events_partition(%s + interval '1 month')", (at,))


def _copy_text(value: str) -> str:
    """``value`` as a field of COPY's text format (a backslash, newline, carriage return or tab escaped)."""
    if "\\" in value:
        value = value.replace("\\", "\\\\")
    if "\n" in value or "\r" in value or "\t" in value:
        value = value.replace("\n", "\\n").replace("\r", "\\r").replace("\t", "\\t")
    return value


def _copy_lines(rows: Sequence[NewRow]) -> io.StringIO:
    """The batch as COPY's text format, one line per row, ``ord`` its index (``\\N``: NULL)."""
    null = "\\N"
    lines = [
        "\t".join(
            (
                str(ord_),
                str(r.match_id),
                _copy_text(r.message_key),
                r.kind,
                _copy_text(r.message),
                null if r.raw is None else "\\\\x" + bytes(r.raw).hex(),
                null if r.record_id is None else str(r.record_id),
                null if r.fence_token is None else str(int(r.fence_token)),
            )
        )
        for ord_, r in enumerate(rows)
    ]
    lines.append("")
    return io.StringIO("\n".join(lines))


def _first_of_each_key(rows: Sequence[NewRow]) -> list[NewRow]:
    """``rows`` with a repeated (match, key) left out (the first one in the batch is the one logged)."""
    seen: set[tuple[str, str]] = set()
    out: list[NewRow] = []
    for r in rows:
        pair = (r.match_id, r.message_key)
        if pair not in seen:
            seen.add(pair)
            out.append(r)
    return out


#: The driver's error classes peewee re-raises as its own (as ``execute_sql`` does): models.db
#: translates those (a lost connection becomes DatabaseUnavailable and is dropped).
_PEEWEE_ERRORS = {
    name: getattr(peewee, name)
    for name in (
        "IntegrityError",
        "DataError",
        "NotSupportedError",
        "ProgrammingError",
        "InternalError",
        "OperationalError",
        "InterfaceError",
        "DatabaseError",
    )
}


def _copy(lines: io.StringIO) -> None:
    """COPY ``lines`` into the staging table, a driver error raised as peewee's (as ``execute_sql``)."""
    try:
        database.cursor().copy_expert(_COPY, lines)
    except psycopg2.Error as exc:
        for cls in type(exc).__mro__:
            if cls.__name__ in _PEEWEE_ERRORS:
                raise _PEEWEE_ERRORS[cls.__name__](*exc.args) from exc
        raise


def _log_chunk(chunk: Sequence[NewRow]) -> tuple[list[int], list[int]]:
    """Log one chunk (a transaction of the caller's): the 0-based places of the rows logged, and refused."""
    if len(chunk) >= COPY_FROM:
        database.execute_sql(_STAGE)
        _copy(_copy_lines(chunk))
        cursor = database.execute_sql(_LOG_STAGED)
        base = 0
    else:
        params = {
            "match": [r.match_id for r in chunk],
            "key": [r.message_key for r in chunk],
            "kind": [r.kind for r in chunk],
            "message": [r.message for r in chunk],
            "raw": [psycopg2.Binary(r.raw) if r.raw is not None else None for r in chunk],
            "record": [r.record_id for r in chunk],
            "token": [r.fence_token for r in chunk],
        }
        cursor = database.execute_sql(_LOG_ARRAYS, params)
        base = 1  # WITH ORDINALITY counts from 1
    logged, refused = cursor.fetchone()
    return [n - base for n in logged or ()], [n - base for n in refused or ()]


@translate_database_errors
def insert_events(rows: Sequence[NewRow]) -> Outcome:
    """Log ``rows`` (fenced, de-duplicated: a (match, key) repeated in ``rows`` is logged once, the
    first); one transaction per CHUNK rows, by COPY into the session's staging table from COPY_FROM
    rows on."""
    logged: set[tuple[str, str]] = set()
    refused: set[tuple[str, str]] = set()
    unique = _first_of_each_key(rows)
    with connection_scope():
        for start in range(0, len(unique), CHUNK):
            chunk = unique[start : start + CHUNK]
            with database.atomic():
                logged_at, refused_at = _log_chunk(chunk)
            logged.update((chunk[n].match_id, chunk[n].message_key) for n in logged_at)
            refused.update((chunk[n].match_id, chunk[n].message_key) for n in refused_at)
    return Outcome(logged=frozenset(logged), refused=frozenset(refused))


def logged_row(
    seq: int, arrived_at: datetime, kind: str, text: str, raw: Any, record: Any, token: Any
) -> LoggedRow:
    """A row of the log from its columns as ``_PAGE`` selects them."""
    if raw is not None and kind != "unreadable":
        text = bytes(raw).decode("utf-8")
    message = json.loads(text)
    return LoggedRow(seq, arrived_at, kind, message, text, record, token)


@translate_database_errors
def page_of(match_id: uuid.UUID | str, *, after: int = 0, limit: int = PAGE) -> list[LoggedRow]:
    """The match's rows after ``seq`` ``after``, in arrival order, at most ``limit`` (the console's pages)."""
    with connection_scope():
        rows = database.execute_sql(_PAGE, (str(match_id), after, limit)).fetchall()
    return [logged_row(*row) for row in rows]


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
        CardEvent(logged_row(*r[:7]), r[7], r[8], r[9], r[10], None if r[11] is None else int(r[11]))
        for r in rows
    ]


@translate_database_errors
def card_types(match_id: uuid.UUID | str) -> list[str]:
    """The event types the match's log holds (the card's filter)."""
    with connection_scope():
        rows = database.execute_sql(_CARD_TYPES, (str(match_id),)).fetchall()
    return sorted(r[0] for r in rows if r[0])


_GAP_MARKERS = """
SELECT record_id::text, message FROM match_events
 WHERE match_id = %s AND kind = 'marker' AND message->'kickoff'->>'marker' = 'gap'
 ORDER BY seq
"""


@translate_database_errors
def gap_markers(match_id: uuid.UUID | str) -> list[tuple[str | None, dict[str, Any]]]:
    """The match's ``gap`` markers (each run writes one as a gap closes), oldest first: (run's record
    id, the marker's fields)."""
    with connection_scope():
        rows = database.execute_sql(_GAP_MARKERS, (str(match_id),)).fetchall()
    out = []
    for record_id, message in rows:
        message = json.loads(message) if isinstance(message, str) else message
        fields = message.get("kickoff") if isinstance(message, dict) else None
        if isinstance(fields, dict):
            out.append((record_id, fields))
    return out
