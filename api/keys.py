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

from api.errors import ApiKeyNotFound, KeyNameTaken
from config.clock import utcnow
from config.errors import ConstraintViolation
from config.records import json_fields
from config.text_rule import text_problem
from models import api_keys as store
from models.audit import AuditContext
from models.boundary import transaction
from publisher.errors import TriggerValidationError

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


#: The longest key name.
MAX_KEY_NAME_LENGTH = 200


def checked_key_name(name: str) -> str:
    """A key's name, stripped: non-blank text (config.text_rule), at most 200 characters and without
    ``@`` (the CLI's ``user@host`` form names the CLI's user in the audit log, never a key)."""
    name = (name or "").strip()
    if not name:
        raise TriggerValidationError("name", "must not be blank")
    problem = text_problem(name, max_length=MAX_KEY_NAME_LENGTH)
    if problem:
        raise TriggerValidationError("name", problem)
    if "@" in name:
        raise TriggerValidationError("name", "must not contain '@' (user@host names the CLI's user)")
    return name


def create_key(
    *,
    name: str,
    scope: Scope,
    leagues: Iterable[str] | None = None,
    audit: AuditContext | None = None,
) -> tuple[ApiKey, str]:
    """Store a new key (limited to ``leagues`` when given); returns it and the key text (shown once).

    With ``audit``, the creation is audited (apikey.create; never the key) in the insert's transaction.
    The name is checked (``checked_key_name``) and unique case-insensitively (KeyNameTaken).
    """
    name = checked_key_name(name)
    limited = _leagues(leagues)
    key = KEY_PREFIX + secrets.token_urlsafe(32)
    key_id = str(uuid.uuid4())
    now = utcnow()
    try:
        with transaction():
            store.insert_key(
                key_id=key_id,
                name=name,
                scope=scope.value,
                key_hash=hash_key(key),
                created_at=now,
                leagues=_listed(limited),
            )
            if audit is not None:
                audit.record(
                    "apikey.create",
                    "apikey",
                    key_id,
                    after={"name": name, "scope": scope.value, "leagues": _listed(limited)},
                )
    except ConstraintViolation as exc:
        raise KeyNameTaken(f"an API key named {name!r} exists already (names are unique, any case)") from exc
    logger.info("api key created: id=%s name=%s scope=%s leagues=%s", key_id, name, scope.value, limited)
    return ApiKey(key_id, name, scope, now, None, limited), key


def _listed(leagues: tuple[str, ...] | None) -> list[str] | None:
    return None if leagues is None else list(leagues)


def _row(row: store.KeyRow) -> ApiKey:
    leagues = None if row.leagues is None else tuple(row.leagues)
    return ApiKey(str(row.id), row.name, Scope(row.scope), row.created_at, row.revoked_at, leagues)


def list_keys() -> list[ApiKey]:
    """Every key, oldest first, revoked ones included."""
    return [_row(r) for r in store.all_key_rows()]


def key_names(key_ids: Iterable[str]) -> dict[str, str]:
    """Key id -> name for the given ids (revoked keys included; unknown ids left out)."""
    ids = sorted({str(k) for k in key_ids if k is not None})
    if not ids:
        return {}
    return store.names_of_keys(ids)


def revoke_key(key_id: str, *, audit: AuditContext | None = None) -> ApiKey:
    """Revoke key ``key_id`` (idempotent); ApiKeyNotFound if there is none.

    With ``audit``, the revocation is audited (apikey.revoke) in the update's transaction.
    """
    with transaction():
        row = store.revoke_key_row(str(key_id), at=utcnow())
        if row is not None and audit is not None:
            audit.record("apikey.revoke", "apikey", str(row.id), after={"name": row.name, "scope": row.scope})
    if row is None:
        raise ApiKeyNotFound(f"no API key has id {key_id}")
    logger.info("api key revoked: id=%s", key_id)
    return _row(row)


def authenticate(key: str) -> ApiKey | None:
    """The live key ``key`` stands for, or None (unknown or revoked)."""
    digest = hash_key(key)
    found = store.live_key_row_by_hash(digest)
    if found is None or not hmac.compare_digest(found.key_hash, digest):
        return None
    return _row(found.row)
