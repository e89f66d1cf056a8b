"""The audit log (table audit_log, append-only): who did which state-changing act, why, and when.

The only SQL touching audit_log. ``record_audit`` writes one entry inside the caller's
transaction when there is one (a savepoint), else in its own; ``AuditContext`` is what an
operator act is given to audit itself (who, why, which request); ``prune_audit`` is the
retention job (the only delete the table's trigger lets through).
"""

from __future__ import annotations

import json
import logging
import os
import pwd
import socket
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import peewee

from config.clock import ensure_utc
from config.errors import Forbidden
from config.text_rule import checked_text
from models.audit_acts import check_action
from models.boundary import translate_database_errors
from models.db import database
from models.match import match_label

logger = logging.getLogger(__name__)

_COLUMNS = "id, at, who_key_id, who, action, target_kind, target_id, reason, before, after, request_id"
#: A match id as an audit target (target_id is text: only a UUID is looked up as a match).
_UUID = "^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$"


@dataclass(frozen=True)
class Actor:
    """Who acts: an API key (its id and name) or the CLI's OS user (key_id None, name ``user@host``)."""

    key_id: str | None
    name: str

    @classmethod
    def cli(cls) -> Actor:
        """The operator running the CLI: ``os_user@host``, the user of the process's real uid (never
        LOGNAME or USER, which the caller sets); ``uid<N>`` when the uid has no passwd entry."""
        uid = os.getuid()
        try:
            user = pwd.getpwuid(uid).pw_name
        except KeyError:  # no passwd entry (a container's arbitrary uid)
            user = f"uid{uid}"
        return cls(key_id=None, name=f"{user}@{socket.gethostname()}")

    @classmethod
    def api_key(cls, key_id: str, name: str) -> Actor:
        """The holder of an API key (the API, the console)."""
        return cls(key_id=str(key_id), name=name)


@dataclass(frozen=True)
class AuditEntry:
    """One stored entry."""

    id: int
    at: datetime
    who_key_id: str | None
    who: str
    action: str
    target_kind: str
    target_id: str | None
    reason: str | None
    before: Any
    after: Any
    request_id: str | None
    title: str | None = None  # a match target's label, "HOU @ KC (mlb)" (None: no match, or gone)

    @property
    def target(self) -> str:
        """``kind:id`` (or the kind alone)."""
        return f"{self.target_kind}:{self.target_id}" if self.target_id else self.target_kind

    def as_dict(self) -> dict[str, Any]:
        """The entry as `kickoff audit list --json` and GET /v1/audit print it."""
        return {
            "at": self.at.astimezone(UTC).isoformat(),
            "who": self.who,
            "who_key_id": self.who_key_id,
            "action": self.action,
            "target": self.target,
            "title": self.title,
            "reason": self.reason,
            "before": self.before,
            "after": self.after,
            "request_id": self.request_id,
        }


def _jsonb(value: Any) -> str | None:
    return None if value is None else json.dumps(value, default=str, sort_keys=True)


@translate_database_errors
def record_audit(
    *,
    actor: Actor,
    action: str,
    target_kind: str,
    target_id: str | None,
    reason: str | None = None,
    before: Any = None,
    after: Any = None,
    request_id: str | None = None,
) -> None:
    """Append one entry (in the caller's transaction where there is one); ``action`` must be declared in
    models.audit_acts.ACTIONS (ValueError otherwise) and ``reason`` keep the text rule (InvalidText)."""
    check_action(action)
    if reason:
        checked_text(reason, field="reason")
    with database.atomic():
        database.execute_sql(
            "INSERT INTO audit_log (who_key_id, who, action, target_kind, target_id, reason, before, after,"
            " request_id) VALUES (%s, %s, %s, %s, %s, %s, %s::jsonb, %s::jsonb, %s)",
            (
                actor.key_id,
                actor.name,
                action,
                target_kind,
                None if target_id is None else str(target_id),
                reason or None,
                _jsonb(before),
                _jsonb(after),
                request_id,
            ),
        )
    logger.info("audit: %s %s %s:%s", actor.name, action, target_kind, target_id)


@dataclass(frozen=True)
class AuditContext:
    """Who asks for an operator act, why and in which request: what its audit entries say besides the act.

    A library function that changes state takes ``audit: AuditContext | None``; with one it writes
    its entry through ``record`` (None: nothing is audited, e.g. a worker's own act).
    """

    actor: Actor
    reason: str | None = None  # the operator's reason (--reason, a body's or form's reason)
    request_id: str | None = None  # the API request's X-Request-Id (None from the CLI)

    def record(
        self, action: str, target_kind: str, target_id: str | None, *, before: Any = None, after: Any = None
    ) -> None:
        """Append the entry of ``action`` on ``target_kind:target_id`` (record_audit) with this context."""
        record_audit(
            actor=self.actor,
            action=action,
            target_kind=target_kind,
            target_id=target_id,
            reason=self.reason,
            before=before,
            after=after,
            request_id=self.request_id,
        )


@translate_database_errors
def audit_entries(
    *,
    who: str | None = None,
    action: str | None = None,
    match_id: str | None = None,
    since: datetime | None = None,
    limit: int | None = 100,
    oldest_first: bool = False,
) -> list[AuditEntry]:
    """Entries matching every filter given, newest first (``oldest_first``: the export's order)."""
    where: list[str] = []
    params: list[Any] = []
    if who is not None:
        where.append("who = %s")
        params.append(who)
    if action is not None:
        where.append("action = %s")
        params.append(action)
    if match_id is not None:
        where.append("target_kind = 'match' AND target_id = %s")
        params.append(str(match_id))
    if since is not None:
        where.append("at >= %s")
        params.append(ensure_utc(since, what="since"))
    sql = f"SELECT {_COLUMNS} FROM audit_log"
    if where:
        sql += " WHERE " + " AND ".join(where)
    sql += " ORDER BY at, id" if oldest_first else " ORDER BY at DESC, id DESC"
    if limit is not None:
        sql += " LIMIT %s"
        params.append(limit)
    # each match target with its title and league (the match's label), read beside the page of entries
    sql = (
        f"SELECT a.*, m.title, l.name, m.sr_id FROM ({sql}) a "
        "LEFT JOIN matches m ON a.target_kind = 'match' AND m.id = "
        f"(CASE WHEN a.target_id ~* '{_UUID}' THEN a.target_id::uuid END) "
        "LEFT JOIN leagues l ON l.id = m.league_id"
        + (" ORDER BY a.at, a.id" if oldest_first else " ORDER BY a.at DESC, a.id DESC")
    )
    rows = database.execute_sql(sql, params).fetchall()
    return [
        AuditEntry(*row[:-3], title=match_label(row[-3], row[-2], row[-1]) if row[-1] is not None else None)
        for row in rows
    ]


@translate_database_errors
def prune_audit(*, days: int, actor: Actor | None = None) -> int:
    """Delete the entries older than ``days`` days (the retention job) and record the prune as an
    entry of ``actor`` (None: ``retention``); returns how many went.

    PostgreSQL's prune_audit_log (SECURITY DEFINER, the owner's) refuses fewer days than the floor
    (audit_policy, AUDIT_RETENTION_DAYS at the last ``kickoff db migrate``): Forbidden.
    """
    who = None if actor is None else actor.name
    try:
        with database.atomic():
            (n,) = database.execute_sql("SELECT prune_audit_log(%s, %s)", (days, who)).fetchone()
    except peewee.DatabaseError as exc:
        if "below the floor" in str(exc):
            raise Forbidden(str(exc).strip().splitlines()[0]) from exc
        raise
    logger.info("audit: pruned %d entries older than %d days", n, days)
    return int(n)
