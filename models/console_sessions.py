"""The store of ``console_sessions``: the only module with SQL on console sessions.

A session row holds the SHA-256 of the browser's token (``token_hash``), its API key, its CSRF
token and its times; every live-session read joins ``api_keys`` so a revoked key has none.
``SessionRow`` is (api_key_id, key_name, scope, csrf_token, expires_at).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from models.boundary import translate_database_errors
from models.db import database

#: (api_key_id, key_name, scope, csrf_token, expires_at)
SessionRow = tuple[Any, ...]


@translate_database_errors
def delete_ended_sessions(*, now: datetime, idle_since: datetime) -> None:
    """Delete the sessions past their end (``now``) or unused since before ``idle_since``."""
    database.execute_sql(
        "DELETE FROM console_sessions WHERE expires_at < %s OR last_seen_at < %s", (now, idle_since)
    )


@translate_database_errors
def insert_session(
    *, token_hash: str, api_key_id: str, csrf_token: str, created_at: datetime, expires_at: datetime
) -> None:
    """Store a new session, last seen at ``created_at``."""
    database.execute_sql(
        "INSERT INTO console_sessions"
        " (token_hash, api_key_id, csrf_token, created_at, expires_at, last_seen_at)"
        " VALUES (%s, %s, %s, %s, %s, %s)",
        (token_hash, api_key_id, csrf_token, created_at, expires_at, created_at),
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
    token_hash: str, *, now: datetime, idle_since: datetime, touch: bool
) -> SessionRow | None:
    """The live session of ``token_hash`` (not expired at ``now``, used since ``idle_since``, its key not
    revoked), or None; ``touch`` marks it used at ``now`` in the same statement."""
    params = (token_hash, now, idle_since)
    if touch:
        query = (
            "UPDATE console_sessions s SET last_seen_at = %s FROM api_keys k "
            "WHERE k.id = s.api_key_id AND s.token_hash = %s AND s.expires_at > %s AND s.last_seen_at > %s "
            "AND k.revoked_at IS NULL "
            "RETURNING k.id::text, k.name, k.scope, s.csrf_token, s.expires_at"
        )
        params = (now, *params)
    else:
        query = (
            "SELECT k.id::text, k.name, k.scope, s.csrf_token, s.expires_at FROM console_sessions s "
            "JOIN api_keys k ON k.id = s.api_key_id "
            "WHERE s.token_hash = %s AND s.expires_at > %s AND s.last_seen_at > %s AND k.revoked_at IS NULL"
        )
    with database.atomic():
        return database.execute_sql(query, params).fetchone()


@translate_database_errors
def delete_session(token_hash: str) -> None:
    """Delete the session of ``token_hash`` (none: nothing)."""
    database.execute_sql("DELETE FROM console_sessions WHERE token_hash = %s", (token_hash,))
