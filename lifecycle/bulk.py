"""Bulk listener actions with a preview: pick matches by a filter, preview them, act on exactly those.

``preview_bulk`` selects the matches of a filter (league, match status, board badge, match ids)
and keeps the preview in Redis under a random confirm token for ``CONFIRM_SECONDS``
(``BulkPreviews.save_bulk_preview``, keyed by the token's SHA-256): the action, the canonical
filter, the sorted match ids and the caller. ``run_bulk`` takes that preview back (GETDEL: a
confirm is used once), checks that it was issued for the same action, filter and caller, and
acts on exactly the previewed ids: a match that joined the filter since is not touched, one that
left it is still acted on, and one that no longer exists is a per-match error. Each per-match act
goes through the library function of its single act (``stop_match_listener``, ``request_start``,
``set_auto_dispatch``), which audits it with the reason, the actor and the request id; the bulk
act writes one entry of its own (``listeners.bulk``, target the filter, after the ids).

Stored in Redis rather than signed (HMAC): the server keeps the exact id set (no token grows
with it), no secret has to be shared between API processes, and a confirm cannot be replayed.
"""

from __future__ import annotations

import hashlib
import json
import logging
import secrets
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta
from typing import Any

from config.clock import utcnow
from config.errors import KickoffError
from config.settings import KickoffSettings
from lifecycle.board import NO_RUN, listener_board
from lifecycle.cleanup import set_auto_dispatch, stop_match_listener
from lifecycle.dispatch import Sender, request_start
from lifecycle.errors import BulkConflict, BulkInvalid
from lifecycle.leagues import get_league
from lifecycle.match_ref import resolve_match_id
from models.audit import Actor, AuditContext
from models.badges import Badge
from models.coordination import CoordinationStore
from models.match import match_label, match_labels, match_rows_by_league_and_sr_id
from models.status import KNOWN

logger = logging.getLogger(__name__)

#: What a bulk act may do to each match.
ACTIONS = ("stop", "start", "force-start", "dispatch-on", "dispatch-off")
#: The badges a filter may name (``-``: no run).
BADGES = (*(b.value for b in Badge), NO_RUN)
#: The match statuses a filter may name.
STATUSES = tuple(sorted(KNOWN))
#: How long a preview's confirm stays valid.
CONFIRM_SECONDS = 300
#: Most matches one bulk act may touch (a larger selection is refused: narrow the filter).
MAX_BULK_MATCHES = 500


@dataclass(frozen=True)
class BulkFilter:
    """Which matches: one league, one match status, one board badge, some match ids (all that are set)."""

    league: str | None = None
    status: str | None = None
    badge: str | None = None
    match_ids: tuple[str, ...] = ()

    def canonical(self) -> dict[str, Any]:
        """The filter as stored and compared: every key, match ids sorted and deduplicated."""
        return {
            "league": self.league,
            "status": self.status,
            "badge": self.badge,
            "match_ids": sorted(set(self.match_ids)),
        }

    def text(self) -> str:
        """The canonical filter as one compact JSON text (the audit entry's target id)."""
        return json.dumps(self.canonical(), sort_keys=True, separators=(",", ":"))


@dataclass(frozen=True)
class BulkMatch:
    """One previewed match as the board shows it."""

    match_id: str
    sr_id: str
    league: str
    status: str
    badge: str
    title: str | None = None  # "HOU @ KC" (None: the schedule gave none)

    @property
    def label(self) -> str:
        return match_label(self.title, self.league, self.sr_id)


@dataclass(frozen=True)
class BulkPreview:
    """What a bulk act would touch, and the confirm that lets it (None when nothing matched)."""

    action: str
    filter: BulkFilter
    matches: list[BulkMatch]
    confirm: str | None
    expires_at: datetime | None

    @property
    def match_ids(self) -> list[str]:
        return [m.match_id for m in self.matches]

    def as_dict(self) -> dict[str, Any]:
        return {
            "action": self.action,
            "filter": self.filter.canonical(),
            "count": len(self.matches),
            "match_ids": self.match_ids,
            "matches": [asdict(m) for m in self.matches],
            "confirm": self.confirm,
            "expires_at": self.expires_at.isoformat(timespec="seconds") if self.expires_at else None,
        }


@dataclass(frozen=True)
class BulkResult:
    """One match's outcome: ``ok`` and what was done, or why not."""

    match_id: str
    ok: bool
    detail: str
    title: str | None = None  # the match's label, "HOU @ KC (mlb)" (None: the match is gone)


@dataclass(frozen=True)
class BulkOutcome:
    """What a confirmed bulk act did, match by match (in the previewed order)."""

    action: str
    results: list[BulkResult] = field(default_factory=list)

    @property
    def failed(self) -> int:
        return sum(not r.ok for r in self.results)

    def as_dict(self) -> dict[str, Any]:
        return {
            "action": self.action,
            "count": len(self.results),
            "failed": self.failed,
            "results": [asdict(r) for r in self.results],
        }


def _check(action: str, flt: BulkFilter, reason: str | None) -> str:
    """The stripped reason; BulkInvalid for an unknown action, an open filter or no reason."""
    if action not in ACTIONS:
        raise BulkInvalid(f"unknown bulk action {action!r} (one of {', '.join(ACTIONS)})", field="action")
    if not flt.league and not flt.match_ids:
        raise BulkInvalid("a bulk filter needs a league or match ids", field="filter")
    if flt.status is not None and flt.status not in STATUSES:
        raise BulkInvalid(f"unknown match status {flt.status!r}", field="filter.status")
    if flt.badge is not None and flt.badge not in BADGES:
        raise BulkInvalid(f"unknown badge {flt.badge!r} (one of {', '.join(BADGES)})", field="filter.badge")
    text = (reason or "").strip()
    if not text:
        raise BulkInvalid("a bulk action needs a reason (it goes into the audit log)", field="reason")
    return text


def select_matches(
    flt: BulkFilter, *, settings: KickoffSettings, coordination: CoordinationStore
) -> list[BulkMatch]:
    """The matches of ``flt`` by league and sr_id, each with its board badge.

    An unknown league or match reference is NotFound (a typo selects nothing silently otherwise).
    More than MAX_BULK_MATCHES is BulkConflict.
    """
    rows = match_rows_by_league_and_sr_id(
        league_id=get_league(flt.league).id if flt.league else None,
        match_ids=sorted({resolve_match_id(ref) for ref in flt.match_ids}) if flt.match_ids else None,
        status=flt.status,
    )
    if flt.badge is None and len(rows) > MAX_BULK_MATCHES:
        raise _too_many(len(rows))
    badges = (
        {
            e.match_id: e.badge
            for e in listener_board(
                settings=settings, coordination=coordination, match_ids=[r[0] for r in rows]
            )
        }
        if rows
        else {}
    )
    found = [
        BulkMatch(mid, sr_id, league, status, badges.get(mid, NO_RUN), title)
        for mid, sr_id, league, status, title in rows
    ]
    if flt.badge is not None:
        found = [m for m in found if m.badge == flt.badge]
    if len(found) > MAX_BULK_MATCHES:
        raise _too_many(len(found))
    return found


def _too_many(n: int) -> BulkConflict:
    return BulkConflict(
        f"the filter matches {n} matches, more than {MAX_BULK_MATCHES} one bulk action may touch: narrow it",
        field="filter",
    )


def _digest(confirm: str) -> str:
    return hashlib.sha256(confirm.encode()).hexdigest()


def preview_bulk(
    action: str,
    flt: BulkFilter,
    *,
    settings: KickoffSettings,
    coordination: CoordinationStore,
    actor: Actor,
    reason: str | None,
    keep: bool = True,
    ttl_seconds: float = CONFIRM_SECONDS,
) -> BulkPreview:
    """The matches ``action`` would touch; with ``keep`` (and any match), a confirm kept for ``ttl_seconds``.

    Changes nothing but the kept preview. The confirm is bound to the action, the canonical filter,
    the exact match ids and the caller (``actor``).
    """
    _check(action, flt, reason)
    matches = select_matches(flt, settings=settings, coordination=coordination)
    if not keep or not matches:
        return BulkPreview(action, flt, matches, None, None)
    confirm = secrets.token_urlsafe(32)
    expires = utcnow() + timedelta(seconds=ttl_seconds)
    kept = {
        "action": action,
        "filter": flt.canonical(),
        "match_ids": [m.match_id for m in matches],
        "who_key_id": actor.key_id,
        "who": actor.name,
    }
    coordination.previews.save_bulk_preview(
        _digest(confirm), json.dumps(kept, sort_keys=True), ttl_seconds=ttl_seconds
    )
    logger.info("bulk %s previewed by %s: %d matches", action, actor.name, len(matches))
    return BulkPreview(action, flt, matches, confirm, expires)


def _previewed_ids(
    confirm: str, action: str, flt: BulkFilter, actor: Actor, coordination: CoordinationStore
) -> list[str]:
    """The match ids kept for ``confirm`` (taken: used once); BulkConflict when it does not bind this call.

    The preview is read first and taken only when it binds this call (action, filter, caller), so a
    confirm sent with another action, filter or key leaves it usable by its own caller.
    """
    digest = _digest(confirm)
    raw = coordination.previews.peek_bulk_preview(digest)
    if raw is None:
        raise BulkConflict("the confirm is unknown, expired or already used: preview again", field="confirm")
    kept = json.loads(raw)
    if kept["action"] != action or kept["filter"] != flt.canonical():
        raise BulkConflict(
            "the confirm was issued for another action or filter: preview again", field="confirm"
        )
    if (kept["who_key_id"], kept["who"]) != (actor.key_id, actor.name):
        raise BulkConflict("the confirm was issued to another caller: preview again", field="confirm")
    if coordination.previews.take_bulk_preview(digest) is None:  # taken meanwhile by a concurrent confirm
        raise BulkConflict("the confirm is unknown, expired or already used: preview again", field="confirm")
    return list(kept["match_ids"])


def _act_on(
    action: str,
    match_id: str,
    *,
    settings: KickoffSettings,
    coordination: CoordinationStore,
    send: Sender | None,
    audit: AuditContext,
) -> str:
    """Do ``action`` to one match through its single act's library function; the sentence to show."""
    if action == "stop":
        r = stop_match_listener(match_id, settings=settings, coordination=coordination, audit=audit)
        return f"stopped: {r.rows_closed} rows closed with 15; auto-dispatch off"
    if action in ("start", "force-start"):
        if send is None:
            raise BulkInvalid("a bulk start needs a sender", field="action")
        mid = resolve_match_id(match_id)
        _message, note = request_start(
            mid,
            overrides=None,
            force=action == "force-start",
            coordination=coordination,
            send=send,
            audit=audit,
        )
        return note
    on = action == "dispatch-on"
    was = set_auto_dispatch(match_id, on, coordination=coordination, audit=audit)
    return f"auto-dispatch {'on' if on else 'off'} (was {'on' if was else 'off'})"


def run_bulk(
    action: str,
    flt: BulkFilter,
    confirm: str,
    *,
    settings: KickoffSettings,
    coordination: CoordinationStore,
    send: Sender | None,
    actor: Actor,
    reason: str | None,
    request_id: str | None = None,
    describe: Callable[[KickoffError], str] = str,
) -> BulkOutcome:
    """Act on exactly the matches previewed under ``confirm``, each on its own; audit each and the whole.

    A match whose act is refused (it no longer exists, its starts are exhausted, ...) is a result
    with ``ok`` false and ``describe(error)`` as its detail; the others go on. ``send`` sends the
    start messages (start and force-start).
    """
    audit = AuditContext(actor, reason=_check(action, flt, reason), request_id=request_id)
    ids = _previewed_ids(confirm, action, flt, actor, coordination)
    labels = match_labels(ids)
    outcome = BulkOutcome(action)
    try:
        for mid in ids:
            try:
                detail = _act_on(
                    action, mid, settings=settings, coordination=coordination, send=send, audit=audit
                )
                outcome.results.append(BulkResult(mid, True, detail, labels.get(mid)))
            except KickoffError as exc:
                logger.warning("match %s: bulk %s refused: %s", mid, action, exc)
                outcome.results.append(BulkResult(mid, False, describe(exc), labels.get(mid)))
    finally:
        audit.record(
            "listeners.bulk",
            "filter",
            flt.text(),
            before={"action": action},
            after={"match_ids": ids, "failed": [r.match_id for r in outcome.results if not r.ok]},
        )
    logger.info("bulk %s by %s: %d matches, %d failed", action, actor.name, len(ids), outcome.failed)
    return outcome


def bulk_filter(
    *,
    league: str | None = None,
    status: str | None = None,
    badge: str | None = None,
    match_ids: Sequence[str] = (),
) -> BulkFilter:
    """A BulkFilter from optional fields (blank text is unset)."""
    return BulkFilter(
        league=(league or "").strip() or None,
        status=(status or "").strip() or None,
        badge=(badge or "").strip() or None,
        match_ids=tuple(str(m).strip() for m in match_ids if str(m).strip()),
    )
