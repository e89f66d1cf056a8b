"""The store of ``console_sessions``: the only module with SQL on console sessions.

A session row holds the SHA-256 of the browser's token (``token_hash``), its API key, its CSRF
token and its times; every live-session read joins ``api_keys`` so a revoked key has none.
A live session reads as a ``SessionRow``.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, NamedTuple

from models.boundary import translate_database_errors
from models.db import database


class SessionRow(NamedTuple):
    """A live session with its API key, as the live-session reads return it."""

    api_key_id: str
    key_name: str
    scope: str
    csrf_token: str
    expires_at: datetime
    leagues: list[str] | None  # the key's leagues (None: every league)


@translate_database_errors
def delete_ended_sessions(*, now: datetime, idle_since: datetime) -> None:
    """Delete the sessions past their end (``now``) or unused since before ``idle_since``."""
    database.execute_sql(
        "DELETE FROM console_sessions WHERE expires_at < %s OR last_seen_at < %s", (now, idle_since)
    )


@translate_database_errors
def insert_session(
    *,
    token_hash: str,
    api_key_id: str,
    csrf_token: str,
    created_at: datetime,
    expires_at: datetime,
    origin: str | None,
) -> None:
    """Store a new session opened on ``origin``, last seen at ``created_at``."""
    database.execute_sql(
        "INSERT INTO console_sessions"
        " (token_hash, api_key_id, csrf_token, created_at, expires_at, last_seen_at, origin)"
        " VALUES (%s, %s, %s, %s, %s, %s, %s)",
        (token_hash, api_key_id, csrf_token, created_at, expires_at, created_at, origin),
    )


@translate_database_errors
def end_sessions_beyond(api_key_id: str, *, keep: int) -> int:
    """Delete key ``api_key_id``'s sessions beyond its newest ``keep``; how many were deleted."""
    return database.execute_sql(
        "DELETE FROM console_sessions WHERE token_hash IN ("
        " SELECT token_hash FROM console_sessions WHERE api_key_id = %s"
        " ORDER BY created_at DESC, token_hash OFFSET %s)",
        (api_key_id, keep),
    ).rowcount


@translate_database_errors
def live_session_row(
    token_hash: str, *, now: datetime, idle_since: datetime, touch: bool, origin: str | None = None
) -> SessionRow | None:
    """The live session of ``token_hash`` (not expired at ``now``, used since ``idle_since``, its key not
    revoked, opened on ``origin`` unless None), or None; ``touch`` marks it used at ``now`` in the same
    statement."""
    params: tuple[Any, ...] = (token_hash, now, idle_since)
    same_origin = ""
    if origin is not None:
        same_origin = " AND s.origin = %s"
        params = (*params, origin)
    if touch:
        query = (
            "UPDATE console_sessions s SET last_seen_at = %s FROM api_keys k "
            "WHERE k.id = s.api_key_id AND s.token_hash = %s AND s.expires_at > %s AND s.last_seen_at > %s "
            "AND k.revoked_at IS NULL" + same_origin + " "
            "RETURNING k.id::text, k.name, k.scope, s.csrf_token, s.expires_at, k.leagues"
        )
        params = (now, *params)
    else:
        query = (
            "SELECT k.id::text, k.name, k.scope, s.csrf_token, s.expires_at, k.leagues "
            "FROM console_sessions s JOIN api_keys k ON k.id = s.api_key_id "
            "WHERE s.token_hash = %s AND s.expires_at > %s AND s.last_seen_at > %s AND k.revoked_at IS NULL"
            + same_origin
        )
    with database.atomic():
        row = database.execute_sql(query, params).fetchone()
    return None if row is None else SessionRow(*row)


@translate_database_errors
def live_session_rows(
    token_hashes: list[str], *, now: datetime, idle_since: datetime
) -> dict[str, SessionRow]:
    """The live sessions among ``token_hashes`` (as ``live_session_row`` without touch), in one statement:
    token hash -> its row; a hash without a live session is left out."""
    if not token_hashes:
        return {}
    rows = database.execute_sql(
        "SELECT s.token_hash, k.id::text, k.name, k.scope, s.csrf_token, s.expires_at, k.leagues "
        "FROM console_sessions s JOIN api_keys k ON k.id = s.api_key_id "
        "WHERE s.token_hash = ANY(%s) AND s.expires_at > %s AND s.last_seen_at > %s AND k.revoked_at IS NULL",
        (list(token_hashes), now, idle_since),
    ).fetchall()
    return {row[0]: SessionRow(*row[1:]) for row in rows}


@translate_database_errors
def delete_session(token_hash: str) -> None:
    """Delete the session of ``token_hash`` (none: nothing)."""
    database.execute_sql("DELETE FROM console_sessions WHERE token_hash = %s", (token_hash,))
