"""API keys: create (printed once), list, revoke, and authenticate a presented key.

A key is 32 random bytes (URL-safe base64, prefixed ``kk_``); only its SHA-256 is stored, so
a high-entropy key needs no slow hash. Lookups are by hash and the stored hash is compared
again in constant time.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import secrets
import uuid
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any

from config.clock import utcnow
from config.errors import ApiKeyNotFound
from config.records import json_fields
from models.audit import Actor, record_audit
from models.db import database, database_errors

logger = logging.getLogger(__name__)

KEY_PREFIX = "kk_"


class Scope(StrEnum):
    """What a key may do: trigger (triggers, trades, action results, run publishing), read (GETs), all."""

    TRIGGER = "trigger"
    OPERATOR = "operator"
    READ = "read"


@dataclass(frozen=True)
class ApiKey:
    """A stored key (never the key itself)."""

    id: str
    name: str
    scope: Scope
    created_at: datetime
    revoked_at: datetime | None

    as_dict = json_fields


def hash_key(key: str) -> str:
    """The stored form of ``key``: hex SHA-256."""
    return hashlib.sha256(key.encode()).hexdigest()


def create_key(
    *, name: str, scope: Scope, actor: Actor | None = None, reason: str | None = None
) -> tuple[ApiKey, str]:
    """Store a new key; returns it and the key text (shown once, never stored).

    With ``actor``, the creation is audited (apikey.create; never the key) in the insert's transaction.
    """
    key = KEY_PREFIX + secrets.token_urlsafe(32)
    key_id = str(uuid.uuid4())
    now = utcnow()
    with database_errors(), database.atomic():
        database.execute_sql(
            "INSERT INTO api_keys (id, name, scope, key_hash, created_at) VALUES (%s, %s, %s, %s, %s)",
            (key_id, name, scope.value, hash_key(key), now),
        )
        if actor is not None:
            record_audit(
                actor=actor,
                action="apikey.create",
                target_kind="apikey",
                target_id=key_id,
                reason=reason,
                after={"name": name, "scope": scope.value},
            )
    logger.info("api key created: id=%s name=%s scope=%s", key_id, name, scope.value)
    return ApiKey(key_id, name, scope, now, None), key


def _row(row: Any) -> ApiKey:
    return ApiKey(str(row[0]), row[1], Scope(row[2]), row[3], row[4])


def list_keys() -> list[ApiKey]:
    """Every key, oldest first, revoked ones included."""
    with database_errors():
        rows = database.execute_sql(
            "SELECT id, name, scope, created_at, revoked_at FROM api_keys ORDER BY created_at, id"
        ).fetchall()
    return [_row(r) for r in rows]


def revoke_key(key_id: str, *, actor: Actor | None = None, reason: str | None = None) -> ApiKey:
    """Revoke key ``key_id`` (idempotent); ApiKeyNotFound if there is none.

    With ``actor``, the revocation is audited (apikey.revoke) in the update's transaction.
    """
    with database_errors(), database.atomic():
        row = database.execute_sql(
            "UPDATE api_keys SET revoked_at = COALESCE(revoked_at, %s) WHERE id::text = %s "
            "RETURNING id, name, scope, created_at, revoked_at",
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
            "SELECT id, name, scope, created_at, revoked_at, key_hash FROM api_keys "
            "WHERE key_hash = %s AND revoked_at IS NULL",
            (digest,),
        ).fetchone()
    if row is None or not hmac.compare_digest(row[5], digest):
        return None
    return _row(row)
