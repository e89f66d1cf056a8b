"""API keys: create (printed once), list, revoke, and authenticate a presented key.

A key is 32 random bytes (URL-safe base64, prefixed ``kk_``); only its SHA-256 is stored, so
a high-entropy key needs no slow hash. Lookups are by hash and the stored hash is compared
again in constant time. A key may be limited to leagues (``leagues``; None: every league).
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import secrets
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any

from config.clock import utcnow
from config.errors import ApiKeyNotFound, TriggerValidationError
from config.records import json_fields
from models.audit import Actor, record_audit
from models.db import database, database_errors

logger = logging.getLogger(__name__)

KEY_PREFIX = "kk_"


class Scope(StrEnum):
    """What a key may do: read < trigger, read < operator < admin (see api.auth.COVERS)."""

    TRIGGER = "trigger"
    OPERATOR = "operator"
    READ = "read"
    ADMIN = "admin"


@dataclass(frozen=True)
class ApiKey:
    """A stored key (never the key itself); ``leagues`` None: not limited to leagues."""

    id: str
    name: str
    scope: Scope
    created_at: datetime
    revoked_at: datetime | None
    leagues: tuple[str, ...] | None = None

    as_dict = json_fields

    def covers_league(self, league_id: str) -> bool:
        """Whether the key may act on league ``league_id`` (an unlimited key may act on every one)."""
        return self.leagues is None or str(league_id) in self.leagues


_COLUMNS = "id, name, scope, created_at, revoked_at, leagues"


def hash_key(key: str) -> str:
    """The stored form of ``key``: hex SHA-256."""
    return hashlib.sha256(key.encode()).hexdigest()


def _leagues(leagues: Iterable[str] | None) -> tuple[str, ...] | None:
    """The leagues a key is limited to, checked and without repeats (None or empty: not limited)."""
    if leagues is None:
        return None
    out: list[str] = []
    for league in leagues:
        if not isinstance(league, str) or not league.strip() or "\x00" in league:
            raise TriggerValidationError("leagues", f"a league id is non-blank text, got {league!r}")
        if league.strip() not in out:
            out.append(league.strip())
    return tuple(out) or None


def create_key(
    *,
    name: str,
    scope: Scope,
    leagues: Iterable[str] | None = None,
    actor: Actor | None = None,
    reason: str | None = None,
    request_id: str | None = None,
) -> tuple[ApiKey, str]:
    """Store a new key (limited to ``leagues`` when given); returns it and the key text (shown once).

    With ``actor``, the creation is audited (apikey.create; never the key) in the insert's transaction.
    """
    limited = _leagues(leagues)
    key = KEY_PREFIX + secrets.token_urlsafe(32)
    key_id = str(uuid.uuid4())
    now = utcnow()
    with database_errors(), database.atomic():
        database.execute_sql(
            "INSERT INTO api_keys (id, name, scope, key_hash, created_at, leagues)"
            " VALUES (%s, %s, %s, %s, %s, %s)",
            (key_id, name, scope.value, hash_key(key), now, _listed(limited)),
        )
        if actor is not None:
            record_audit(
                actor=actor,
                action="apikey.create",
                target_kind="apikey",
                target_id=key_id,
                reason=reason,
                after={"name": name, "scope": scope.value, "leagues": _listed(limited)},
                request_id=request_id,
            )
    logger.info("api key created: id=%s name=%s scope=%s leagues=%s", key_id, name, scope.value, limited)
    return ApiKey(key_id, name, scope, now, None, limited), key


def _listed(leagues: tuple[str, ...] | None) -> list[str] | None:
    return None if leagues is None else list(leagues)


def _row(row: Any) -> ApiKey:
    leagues = None if row[5] is None else tuple(row[5])
    return ApiKey(str(row[0]), row[1], Scope(row[2]), row[3], row[4], leagues)


def list_keys() -> list[ApiKey]:
    """Every key, oldest first, revoked ones included."""
    with database_errors():
        rows = database.execute_sql(f"SELECT {_COLUMNS} FROM api_keys ORDER BY created_at, id").fetchall()
    return [_row(r) for r in rows]


def key_names(key_ids: Iterable[str]) -> dict[str, str]:
    """Key id -> name for the given ids (revoked keys included; unknown ids left out)."""
    ids = sorted({str(k) for k in key_ids if k is not None})
    if not ids:
        return {}
    with database_errors():
        rows = database.execute_sql("SELECT id::text, name FROM api_keys WHERE id::text = ANY(%s)", (ids,))
        return {row[0]: row[1] for row in rows.fetchall()}


def revoke_key(
    key_id: str, *, actor: Actor | None = None, reason: str | None = None, request_id: str | None = None
) -> ApiKey:
    """Revoke key ``key_id`` (idempotent); ApiKeyNotFound if there is none.

    With ``actor``, the revocation is audited (apikey.revoke) in the update's transaction.
    """
    with database_errors(), database.atomic():
        row = database.execute_sql(
            "UPDATE api_keys SET revoked_at = COALESCE(revoked_at, %s) WHERE id::text = %s "
            f"RETURNING {_COLUMNS}",
            (utcnow(), str(key_id)),
        ).fetchone()
        if row is not None and actor is not None:
            record_audit(
                actor=actor,
                action="apikey.revoke",
                target_kind="apikey",
                target_id=str(row[0]),
                reason=reason,
                after={"name": row[1], "scope": row[2]},
                request_id=request_id,
            )
    if row is None:
        raise ApiKeyNotFound(f"no API key has id {key_id}")
    logger.info("api key revoked: id=%s", key_id)
    return _row(row)


def authenticate(key: str) -> ApiKey | None:
    """The live key ``key`` stands for, or None (unknown or revoked)."""
    digest = hash_key(key)
    with database_errors():
        row = database.execute_sql(
            f"SELECT {_COLUMNS}, key_hash FROM api_keys WHERE key_hash = %s AND revoked_at IS NULL",
            (digest,),
        ).fetchone()
    if row is None or not hmac.compare_digest(row[6], digest):
        return None
    return _row(row)
