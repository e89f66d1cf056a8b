"""Console sign-ins: a session per API key sign-in, valid while the key is live and the session young.

The browser holds a random token (the session cookie); PostgreSQL holds only its SHA-256, the
key it was made with and the session's CSRF token. Every check joins ``api_keys``, so revoking
the key ends its sessions at once.
"""

from __future__ import annotations

import hmac
import logging
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta

from api.keys import Scope, authenticate, hash_key
from config.clock import utcnow
from config.errors import SignInRefused
from models.db import database, database_errors

logger = logging.getLogger(__name__)

#: Scopes that may sign in: the console reads (read) or reads and acts (operator).
CONSOLE_SCOPES = frozenset({Scope.READ, Scope.OPERATOR})


@dataclass(frozen=True)
class Session:
    """A live console session (never its token)."""

    api_key_id: str
    key_name: str
    scope: Scope
    csrf_token: str
    expires_at: datetime

    @property
    def can_act(self) -> bool:
        """Whether the session may press action buttons (operator keys only)."""
        return self.scope is Scope.OPERATOR

    def csrf_ok(self, presented: str | None) -> bool:
        """Whether ``presented`` is this session's CSRF token (constant-time)."""
        return bool(presented) and hmac.compare_digest(presented.encode(), self.csrf_token.encode())


def sign_in(key: str, *, lifetime: timedelta) -> tuple[Session, str]:
    """Open a session for API key ``key``; returns it and the cookie token (SignInRefused if not)."""
    found = authenticate(key.strip()) if key.strip() else None
    if found is None:
        raise SignInRefused("the API key is not valid (unknown or revoked)")
    if found.scope not in CONSOLE_SCOPES:
        raise SignInRefused(f"a {found.scope.value} key cannot open the console (read or operator needed)")
    token = secrets.token_urlsafe(32)
    csrf = secrets.token_urlsafe(32)
    now = utcnow()
    with database_errors(), database.atomic():
        database.execute_sql("DELETE FROM console_sessions WHERE expires_at < %s", (now,))
        database.execute_sql(
            "INSERT INTO console_sessions (token_hash, api_key_id, csrf_token, created_at, expires_at) "
            "VALUES (%s, %s, %s, %s, %s)",
            (hash_key(token), found.id, csrf, now, now + lifetime),
        )
    logger.info("console sign-in: key id=%s name=%s scope=%s", found.id, found.name, found.scope.value)
    return Session(found.id, found.name, found.scope, csrf, now + lifetime), token


def session_for(token: str | None) -> Session | None:
    """The live session of cookie token ``token``, or None (unknown, expired, or its key revoked)."""
    if not token:
        return None
    with database_errors():
        row = database.execute_sql(
            "SELECT k.id::text, k.name, k.scope, s.csrf_token, s.expires_at FROM console_sessions s "
            "JOIN api_keys k ON k.id = s.api_key_id "
            "WHERE s.token_hash = %s AND s.expires_at > %s AND k.revoked_at IS NULL",
            (hash_key(token), utcnow()),
        ).fetchone()
    if row is None:
        return None
    return Session(row[0], row[1], Scope(row[2]), row[3], row[4])


def sign_out(token: str | None) -> None:
    """End the session of ``token`` (nothing when there is none)."""
    if not token:
        return
    with database_errors(), database.atomic():
        database.execute_sql("DELETE FROM console_sessions WHERE token_hash = %s", (hash_key(token),))
