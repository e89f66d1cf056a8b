"""Console sign-ins: a session per API key sign-in, valid while its key is live and it is young and in use.

The browser holds a random token (the session cookie); PostgreSQL holds only its SHA-256, the
key it was made with and the session's CSRF token. Every check joins ``api_keys``, so revoking
the key ends its sessions at once. A session ends at ``expires_at`` (CONSOLE_SESSION_HOURS after
sign-in) or after ``SessionPolicy.idle`` without a request (``last_seen_at``), whichever comes
first; a key holds at most ``SessionPolicy.per_key`` sessions (signing in once more ends the oldest).
"""

from __future__ import annotations

import hmac
import logging
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta

from api.errors import SignInRefused
from api.keys import ApiKey, Scope, authenticate, hash_key
from config.clock import utcnow
from config.settings import KickoffSettings
from models import console_sessions as store
from models.api_keys import lock_key
from models.audit import Actor, AuditContext
from models.boundary import transaction

logger = logging.getLogger(__name__)

#: Scopes that may sign in: the console reads (read), reads and acts (operator), and manages keys (admin).
CONSOLE_SCOPES = frozenset({Scope.READ, Scope.OPERATOR, Scope.ADMIN})


@dataclass(frozen=True)
class Session:
    """A live console session (never its token)."""

    api_key_id: str
    key_name: str
    scope: Scope
    csrf_token: str
    expires_at: datetime
    leagues: tuple[str, ...] | None = None  # the key's league limit (None: every league)

    @property
    def actor(self) -> Actor:
        """The session's API key, as the audit log's actor."""
        return Actor.api_key(self.api_key_id, self.key_name)

    @property
    def limited(self) -> bool:
        """Whether the session's key is limited to leagues: it sees its leagues' board and nothing else
        (every other page shows or acts on every league) and acts on nothing."""
        return self.leagues is not None

    @property
    def can_act(self) -> bool:
        """Whether the session may press action buttons (operator and admin keys not limited to leagues)."""
        return self.scope in (Scope.OPERATOR, Scope.ADMIN) and not self.limited

    @property
    def is_admin(self) -> bool:
        """Whether the session may manage API keys (the Keys page; admin keys not limited to leagues)."""
        return self.scope is Scope.ADMIN and not self.limited

    def csrf_ok(self, presented: str | None) -> bool:
        """Whether ``presented`` is this session's CSRF token (constant-time)."""
        return bool(presented) and hmac.compare_digest(presented.encode(), self.csrf_token.encode())


@dataclass(frozen=True)
class SessionPolicy:
    """How long sessions last and how many a key holds (CONSOLE_SESSION_HOURS, _IDLE_MINUTES, _PER_KEY)."""

    lifetime: timedelta
    idle: timedelta
    per_key: int

    @classmethod
    def from_settings(cls, settings: KickoffSettings) -> SessionPolicy:
        return cls(
            lifetime=timedelta(hours=settings.console_session_hours),
            idle=timedelta(minutes=settings.console_session_idle_minutes),
            per_key=settings.console_sessions_per_key,
        )


def _refused(
    found: ApiKey | None, reason: str, *, address: str | None, request_id: str | None
) -> SignInRefused:
    """A refused sign-in; audited (console.sign_in_failed) when the key is a stored one. A key nobody
    holds is no one's act: it is counted by the throttle (deletable, api.console.throttle) and logged,
    never an undeletable audit entry per guess."""
    if found is not None:
        audit = AuditContext(Actor.api_key(found.id, found.name), reason=reason, request_id=request_id)
        audit.record("console.sign_in_failed", "console", address)
    return SignInRefused(reason)


def sign_in(
    key: str,
    *,
    policy: SessionPolicy,
    address: str | None = None,
    request_id: str | None = None,
    origin: str | None = None,
) -> tuple[Session, str]:
    """Open a session for API key ``key``; returns it and the cookie token (SignInRefused if not).

    Ended and idle sessions are deleted first; then the key's sessions beyond the newest
    ``policy.per_key`` (the new one among them), oldest first. The sign-in and each refused one
    of a stored key are audited (console.sign_in, console.sign_in_failed; ``address`` is the
    client's). The session is bound to ``origin`` (the sign-in's scheme://host:port): ``session_for``
    of another origin has none.
    """
    found = authenticate(key.strip()) if key.strip() else None
    if found is None:
        raise _refused(
            None, "the API key is not valid (unknown or revoked)", address=address, request_id=request_id
        )
    if found.scope not in CONSOLE_SCOPES:
        raise _refused(
            found,
            f"a {found.scope.value} key cannot open the console (read, operator or admin needed)",
            address=address,
            request_id=request_id,
        )
    token = secrets.token_urlsafe(32)
    csrf = secrets.token_urlsafe(32)
    now = utcnow()
    with transaction():
        store.delete_ended_sessions(now=now, idle_since=now - policy.idle)
        # One sign-in of a key at a time, so two at once cannot both keep the key's oldest session.
        lock_key(found.id)
        store.insert_session(
            token_hash=hash_key(token),
            api_key_id=found.id,
            csrf_token=csrf,
            created_at=now,
            expires_at=now + policy.lifetime,
            origin=origin,
        )
        ended = store.end_sessions_beyond(found.id, keep=policy.per_key)
        audit = AuditContext(Actor.api_key(found.id, found.name), request_id=request_id)
        audit.record(
            "console.sign_in", "console", address, after={"scope": found.scope.value, "sessions_ended": ended}
        )
    logger.info("console sign-in: key id=%s name=%s scope=%s", found.id, found.name, found.scope.value)
    if ended:
        logger.info(
            "console sign-in: ended %s oldest session(s) of key id=%s (CONSOLE_SESSIONS_PER_KEY=%s)",
            ended,
            found.id,
            policy.per_key,
        )
    return Session(found.id, found.name, found.scope, csrf, now + policy.lifetime, found.leagues), token


def session_for(
    token: str | None, *, idle: timedelta, touch: bool = True, origin: str | None = None
) -> Session | None:
    """The live session of cookie token ``token``, or None (unknown, expired, idle, its key revoked, or,
    with ``origin``, opened on another origin: another port of the same host is another console).

    ``touch``: the request is the browser's (a page, a post, opening the live board): the session
    counts as used now. The live board's own re-checks pass False, so an open board alone does
    not keep a session alive.
    """
    if not token:
        return None
    now = utcnow()
    row = store.live_session_row(hash_key(token), now=now, idle_since=now - idle, touch=touch, origin=origin)
    return _session_of(row)


def _session_of(row: store.SessionRow | None) -> Session | None:
    """The Session a live session row names (None: no row)."""
    if row is None:
        return None
    leagues = tuple(row.leagues) if row.leagues else None
    return Session(row.api_key_id, row.key_name, Scope(row.scope), row.csrf_token, row.expires_at, leagues)


def sessions_for(tokens: list[str], *, idle: timedelta) -> dict[str, Session | None]:
    """Each token's live session (None: unknown, expired, idle or its key revoked), read in one statement
    and not counted as use (the live board's check of its viewers on every reading)."""
    now = utcnow()
    hashes = {token: hash_key(token) for token in tokens if token}
    rows = store.live_session_rows(list(hashes.values()), now=now, idle_since=now - idle)
    return {token: _session_of(rows.get(hashes.get(token, ""))) for token in tokens}


def sign_out(token: str | None, *, audit: AuditContext | None = None, address: str | None = None) -> None:
    """End the session of ``token`` (none: nothing); with ``audit``, audited (console.sign_out)."""
    if not token:
        return
    with transaction():
        store.delete_session(hash_key(token))
        if audit is not None:
            audit.record("console.sign_out", "console", address)
