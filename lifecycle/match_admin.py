"""One match as an operator sees and edits it: settings, runs and barriers; edits checked first."""

from __future__ import annotations

from collections import deque
from datetime import datetime
from pathlib import Path
from typing import Any

from config import spans
from config.errors import ConstraintViolation
from config.settings import KickoffSettings
from lifecycle.board import listener_board
from lifecycle.errors import InvalidMatchEdit, MatchExists
from lifecycle.event_export import document_name
from lifecycle.leagues import get_league
from lifecycle.listener_run import RUN_SETTINGS, load_match_with_league, validate_listener_settings
from listener.archive import TextLog, archive_path, shortcode_for
from models.audit import AuditContext, audit_entries
from models.boundary import transaction
from models.coordination import CoordinationStore
from models.event_log import log_summary
from models.listener_record import MatchListenerRecord, newest_runs_of_match
from models.match import METADATA_KEYS, Match, create_match, matches_with_keys_outside, update_match_fields
from models.status import normalise


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value else None


def _audited(value: Any) -> Any:
    """A changed field's value as the audit log keeps it (times as ISO 8601)."""
    return _iso(value) if isinstance(value, datetime) else value


def match_archive(match: Match, *, data_dir: Path) -> Path:
    """Where a listener host keeps the match's local files (its runs' text logs) under its DATA_DIR."""
    return archive_path(data_dir, match.league.name, shortcode_for(match.sr_id))


def _logged_events(match: Match) -> int | None:
    """How many messages the match's event log holds (None: none yet)."""
    return log_summary(match.id).events or None


def under_data_dir(path: Path | str, *, data_dir: Path) -> str:
    """``path`` relative to DATA_DIR (as the console shows it), or its name when it lies elsewhere."""
    path = Path(path)
    try:
        return str(path.resolve().relative_to(Path(data_dir).resolve()))
    except ValueError:
        return path.name


def run_log_tail(
    match_id: str, record_id: str, *, settings: KickoffSettings, lines: int = 50
) -> tuple[Path | None, list[str]]:
    """The log file of run ``record_id`` of the match and its last ``lines`` lines ([] without a file)."""
    match = load_match_with_league(match_id)
    path = TextLog.for_run(match_archive(match, data_dir=settings.data_dir), record_id).path
    if path is None or not path.exists():
        return path, []
    with path.open(errors="replace") as fh:
        return path, list(deque((line.rstrip("\n") for line in fh), maxlen=lines))


def match_detail(
    match_id: str, *, settings: KickoffSettings, coordination: CoordinationStore, runs_limit: int = 20
) -> dict[str, Any]:
    """The match, its per-match listener settings, its newest runs (with their gap counts), its Redis
    barriers and its archive (path, events, last verification: the stored object or None)."""
    match = load_match_with_league(match_id)
    records = newest_runs_of_match(match.id, runs_limit)
    [entry] = listener_board(settings=settings, coordination=coordination, match_id=str(match.id))
    return {
        "id": str(match.id),
        "sr_id": match.sr_id,
        "league": match.league.name,
        "title": match.title,
        "scheduled": _iso(match.scheduled),
        "status": match.status,
        "is_test": match.is_test,
        "auto_dispatch": match.auto_dispatch_listener,
        "badge": entry.badge,
        "degraded": entry.degraded,  # the open run's event log writing is behind (lifecycle.board)
        "settings": match.start_settings_without_metadata(),
        "last_message_id": match.start_message_id,
        "runs": [
            {
                "record_id": str(r.id),
                "started_at": _iso(r.created_at),
                "heartbeat_at": _iso(r.heartbeat_at),
                "ended_at": _iso(r.ended_at),
                "exit_code": r.exit_code,
                "reason": r.exit_reason,
                "stopped_by": r.stopped_by,
                "host": r.host,
                "pid": r.pid,
                "dry_run": r.dry_run,
                "gaps": r.gaps,
                "gap_seconds": round(float(r.gap_seconds or 0.0), 1),
                "events_backfilled": r.events_backfilled,
                "gaps_unrecovered": r.gaps_unrecovered,
                "events_unrecovered": r.events_unrecovered,
                "trace_id": spans.trace_id_of(r.traceparent),
            }
            for r in records
        ],
        "barriers": {
            "pending": entry.pending,
            "attempts": entry.attempts,
            "exhausted": entry.exhausted,
            "stop_flag": str(match.id) in coordination.stops.stop_flags_among([match.id]),
            "lock_holder": coordination.locks.start_lock_holder(match.id),
        },
        "archive": {
            "path": document_name(match),
            "events": _logged_events(match),
            "verified_at": _iso(match.archive_verified_at),
            "verification": match.archive_verification,
        },
        "timeline": match_timeline(str(match.id), records),
    }


def match_timeline(
    match_id: str, records: list[MatchListenerRecord], *, acts_limit: int = 50
) -> list[dict[str, Any]]:
    """One timeline of the match, newest first: its runs' starts and ends (each end with its gaps)
    and the operator acts the audit log holds for it. Each item: ``at``, ``kind`` (run_started,
    run_ended, act), ``what`` (one line) and, for acts, ``who`` and ``reason``."""
    items: list[tuple[datetime, dict[str, Any]]] = []
    for r in records:
        short = str(r.id)[:8]
        started = {"kind": "run_started", "what": f"run {short} started on {r.host or '?'}"}
        items.append((r.created_at, started))
        if r.ended_at is not None:
            gaps = ""
            if r.gaps:
                gaps = f"; {r.gaps} gaps, {float(r.gap_seconds or 0):.1f}s without a stream, "
                gaps += f"{r.events_backfilled} backfilled"
                if r.gaps_unrecovered:
                    gaps += f", {r.gaps_unrecovered} unrecovered"
            if r.events_unrecovered:
                gaps += f"; {r.events_unrecovered} events missing"
            reason = f" ({r.exit_reason})" if r.exit_reason else ""
            what = f"run {short} ended with exit {r.exit_code}{reason}{gaps}"
            items.append((r.ended_at, {"kind": "run_ended", "what": what}))
    for a in audit_entries(match_id=match_id, limit=acts_limit):
        items.append((a.at, {"kind": "act", "what": a.action, "who": a.who, "reason": a.reason}))
    items.sort(key=lambda item: item[0], reverse=True)
    return [{"at": _iso(at), **item} for at, item in items]


def add_match(
    *,
    league: str,
    sr_id: str,
    scheduled: datetime,
    status: str,
    title: str | None = None,
    is_test: bool = False,
    auto_dispatch: bool = True,
    settings: dict[str, Any] | None = None,
    audit: AuditContext | None = None,
) -> Match:
    """Add a match by hand (``status`` already normalised, ``settings`` already checked); returns it.

    LeagueNotFound for an unknown league; MatchExists when a match with ``sr_id`` exists. With
    ``audit``, the match is audited (match.add) in the insert's transaction.
    """
    lg = get_league(league)
    try:
        with transaction():  # the match and its audit entry in one transaction
            match = create_match(
                league=lg,
                sr_id=sr_id,
                scheduled=scheduled,
                status=status,
                title=title,
                is_test=is_test,
                auto_dispatch_listener=auto_dispatch,
                listener_start_settings=settings or {},
            )
            if audit is not None:
                audit.record(
                    "match.add",
                    "match",
                    str(match.id),
                    after={"sr_id": sr_id, "league": lg.name, "title": title},
                )
    except ConstraintViolation as exc:
        raise MatchExists(f"a match with sr_id {sr_id!r} already exists") from exc
    return match


def edit_match(
    match_id: str,
    *,
    title: str | None = None,
    scheduled: datetime | None = None,
    status: str | None = None,
    set_settings: dict[str, Any] | None = None,
    unset_settings: list[str] | None = None,
    audit: AuditContext | None = None,
) -> dict[str, Any]:
    """Change a match's title, start time, status or per-match listener settings; returns the changes.

    Settings are checked (keys and values, as a run would) before anything is saved; the
    bookkeeping keys (``message_id``...) cannot be set or unset here. With ``audit``, a change is
    audited (match.edit, the changed fields before and after) in the update's transaction.
    """
    match = load_match_with_league(match_id)
    changes: dict[str, Any] = {}
    if status is not None:
        norm = normalise(status)
        if norm is None:
            raise InvalidMatchEdit(f"unknown status {status!r}", field="status")
        if norm != match.status:
            changes["status"] = norm
    if title is not None and title != match.title:
        changes["title"] = title
    if scheduled is not None and scheduled != match.scheduled:
        changes["scheduled"] = scheduled
    if set_settings or unset_settings:
        bookkeeping = sorted((set(set_settings or {}) | set(unset_settings or [])) & set(METADATA_KEYS))
        if bookkeeping:
            raise InvalidMatchEdit(
                f"{bookkeeping[0]} is kickoff's bookkeeping, not a listener setting", field="settings"
            )
        stored = dict(match.listener_start_settings or {})
        user = {k: v for k, v in stored.items() if k not in METADATA_KEYS}
        missing = sorted(set(unset_settings or []) - set(user))
        if missing:
            raise InvalidMatchEdit(
                f"match {match.id} has no setting {missing[0]!r} to unset", field="settings"
            )
        for key in unset_settings or []:
            user.pop(key)
        user.update(set_settings or {})
        validate_listener_settings(user, source="--setting")
        new = {**{k: v for k, v in stored.items() if k in METADATA_KEYS}, **user}
        if new != stored:
            changes["listener_start_settings"] = new
    if changes:
        with transaction():
            update_match_fields(match.id, changes)
            if audit is not None:
                audit.record(
                    "match.edit",
                    "match",
                    str(match.id),
                    before={k: _audited(getattr(match, k)) for k in changes},
                    after={k: _audited(v) for k, v in changes.items()},
                )
    shown = dict(changes)
    if "listener_start_settings" in shown:
        shown["settings"] = {
            k: v for k, v in shown.pop("listener_start_settings").items() if k not in METADATA_KEYS
        }
    if "scheduled" in shown:
        shown["scheduled"] = _iso(shown["scheduled"])
    return shown


def matches_with_refused_settings(*, limit: int = 1000) -> list[tuple[str, list[str]]]:
    """``(match id, its refused keys)`` of each match whose stored settings hold a key no run may set.

    A refused key is one outside RUN_SETTINGS and kickoff's bookkeeping (METADATA_KEYS): such a
    match's starts fail until an operator unsets it (``kickoff matches edit --unset``).
    """
    allowed = sorted(RUN_SETTINGS | METADATA_KEYS)
    return matches_with_keys_outside(allowed, limit=limit)
