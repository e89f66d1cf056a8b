"""The store of ``api_keys`` (migration 0006 and later): the only module with SQL on API keys.

A row is a ``KeyRow``; ``api.keys`` turns it into an ``ApiKey``. Only a key's SHA-256 is stored
(``key_hash``), never the key.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, NamedTuple

from models.boundary import translate_database_errors
from models.db import database


class KeyRow(NamedTuple):
    """One API key as _COLUMNS reads it."""

    id: Any  # uuid
    name: str
    scope: str
    created_at: datetime
    revoked_at: datetime | None
    leagues: list[str] | None  # None: every league


class LiveKey(NamedTuple):
    """A live key's row and its stored hash (compared in constant time by the caller)."""

    row: KeyRow
    key_hash: str


_COLUMNS = "id, name, scope, created_at, revoked_at, leagues"


@translate_database_errors
def insert_key(
    *, key_id: str, name: str, scope: str, key_hash: str, created_at: datetime, leagues: list[str] | None
) -> None:
    """Store a new key (``leagues`` None: not limited to leagues)."""
    database.execute_sql(
        "INSERT INTO api_keys (id, name, scope, key_hash, created_at, leagues)"
        " VALUES (%s, %s, %s, %s, %s, %s)",
        (key_id, name, scope, key_hash, created_at, leagues),
    )


@translate_database_errors
def all_key_rows() -> list[KeyRow]:
    """Every key's row, oldest first, revoked ones included."""
    rows = database.execute_sql(f"SELECT {_COLUMNS} FROM api_keys ORDER BY created_at, id").fetchall()
    return [KeyRow(*row) for row in rows]


@translate_database_errors
def names_of_keys(key_ids: list[str]) -> dict[str, str]:
    """Key id -> name for ``key_ids`` (revoked keys included; unknown ids left out)."""
    rows = database.execute_sql("SELECT id::text, name FROM api_keys WHERE id::text = ANY(%s)", (key_ids,))
    return {row[0]: row[1] for row in rows.fetchall()}


@translate_database_errors
def revoke_key_row(key_id: str, *, at: datetime) -> KeyRow | None:
    """Mark key ``key_id`` revoked at ``at`` (a revoked key keeps its first time); its row, or None."""
    row = database.execute_sql(
        f"UPDATE api_keys SET revoked_at = COALESCE(revoked_at, %s) WHERE id::text = %s RETURNING {_COLUMNS}",
        (at, key_id),
    ).fetchone()
    return None if row is None else KeyRow(*row)


@translate_database_errors
def live_key_row_by_hash(key_hash: str) -> LiveKey | None:
    """The row of the live (not revoked) key whose hash is ``key_hash``, with the stored hash; or None."""
    row = database.execute_sql(
        f"SELECT {_COLUMNS}, key_hash FROM api_keys WHERE key_hash = %s AND revoked_at IS NULL",
        (key_hash,),
    ).fetchone()
    return None if row is None else LiveKey(KeyRow(*row[:6]), row[6])


@translate_database_errors
def lock_key(key_id: str) -> None:
    """Lock key ``key_id``'s row until the transaction ends (one sign-in of a key at a time)."""
    database.execute_sql("SELECT 1 FROM api_keys WHERE id = %s FOR UPDATE", (key_id,))
