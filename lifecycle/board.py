"""The listener board: one entry per match with a run, a start barrier, or auto-dispatch off by a stop.

A match is on the board when it has a lifecycle row, an attempt counter, an exhausted flag or
a pending start key in Redis, a stop flag, or when auto-dispatch is off for a match the
dispatcher would otherwise start (enabled league, live, or pre-game/delayed inside the window):
that is what a stop leaves behind, also for a match stopped while its start was still queued
(no row: badge ``-``, ``auto_dispatch`` false). Each entry shows the match's newest run, where an
open row wins over a later closed one, with that run's gap counts and the match's last archive
verification. An open run whose event log writing is behind (listener.ingest: the writer is away or
half full, or its in-flight messages hit the bound) is ``degraded``: its heartbeat keeps a flag in
Redis while so (lifecycle.heartbeat). One SQL query, one SCAN per key family, one pipelined
round trip for the counters (of the matches that have keys) and one MGET of the open runs' degraded
flags. A live board passes a BoardCache: then the full query runs only when a cheap change token
moved, see BoardCache.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta
from typing import Any

from config.settings import KickoffSettings
from lifecycle.sql.board import (
    MatchOnBoard,
    board_change_token,
    board_row_of_match,
    board_rows,
    board_rows_of_matches,
    database_now,
)
from models.badges import derive_badge
from models.coordination import CoordinationStore
from models.db import release_connection
from models.errors import MatchNotFound
from models.match import match_label
from models.status import DISPATCH_ALWAYS, DISPATCH_IN_WINDOW

#: Badge of a match on the board without any lifecycle row.
NO_RUN = "-"


@dataclass(frozen=True)
class BoardEntry:
    """One match on the board and its newest run."""

    match_id: str  # internal Match.id
    league: str  # league name
    sr_id: str  # the provider's match id
    match_status: str  # Match.status
    badge: str  # models.badges.Badge of the newest run, or "-" without a run
    record_id: str | None  # the newest run's lifecycle row
    heartbeat_age_s: float | None  # open run only
    attempts: int  # failed starts counted in Redis
    exhausted: bool  # attempt cap reached: dispatch skips the match
    pending: bool  # a start is queued or running (pending key)
    auto_dispatch: bool  # Match.auto_dispatch_listener
    exit_code: int | None  # closed run only
    reason: str | None  # the closing reason (exit_reason), closed run only
    host: str | None  # host of the newest run
    pid: int | None  # process of the newest run
    # Gaps of the newest run (None without a run): stream gaps, seconds without a stream, events
    # recovered, gaps whose backfill had not succeeded at exit, events still missing at its close.
    gaps: int | None = None
    gap_seconds: float | None = None
    events_backfilled: int | None = None
    gaps_unrecovered: int | None = None
    events_unrecovered: int | None = None
    # The match's last archive verification (None: never verified): ok, its counts, when.
    archive_ok: bool | None = None
    archive_missing: int | None = None
    archive_extra: int | None = None
    archive_differing: int | None = None
    archive_verified_at: str | None = None
    # The match's title ("HOU @ KC"; None when the schedule gave none), its scheduled start (ISO
    # 8601) and when its newest run started (ISO 8601; None without a run).
    title: str | None = None
    scheduled: str | None = None
    run_started_at: str | None = None
    # How the newest run took its match over (lifecycle.takeover: death_seen, lease_lapsed, handoff);
    # None: it did not (a first start, a plain restart).
    takeover: str | None = None
    # The newest run is open and its event log writing is behind (its heartbeat's flag, lifecycle.heartbeat):
    # PostgreSQL away or the writer's buffer over half full, or the run's in-flight messages at the bound.
    degraded: bool = False

    @property
    def label(self) -> str:
        """How a person names the match: ``HOU @ KC (mlb)``, or its sr_id when it has no title."""
        return match_label(self.title, self.league, self.sr_id)

    @property
    def is_open(self) -> bool:
        """Whether the newest run is an open row (only open rows have a heartbeat age)."""
        return self.heartbeat_age_s is not None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def gaps_text(self) -> str:
        """The run's gaps in one cell: ``2 (3.1s, 14 back)``, ``, 1 lost`` when some stayed missing."""
        return gaps_cell(
            self.gaps,
            self.gap_seconds,
            self.events_backfilled,
            self.gaps_unrecovered,
            self.events_unrecovered,
        )

    @property
    def archive_text(self) -> str:
        """The last verification in one cell: ``ok``, ``3 missing, 1 differing``, ``-`` if never run."""
        return archive_cell(self.archive_ok, self.archive_missing, self.archive_extra, self.archive_differing)


def gaps_cell(
    gaps: int | None,
    seconds: float | None,
    backfilled: int | None,
    gaps_unrecovered: int | None = 0,
    events_unrecovered: int | None = 0,
) -> str:
    """``-`` without a run, ``0`` without gaps, else ``N (S.Ss, B back[, U unrecovered][, E lost])``."""
    if gaps is None:
        return "-"
    if not gaps and not backfilled and not events_unrecovered:
        return "0"
    parts = [f"{seconds or 0.0:.1f}s", f"{backfilled or 0} back"]
    if gaps_unrecovered:
        parts.append(f"{gaps_unrecovered} unrecovered")
    if events_unrecovered:
        parts.append(f"{events_unrecovered} lost")
    return f"{gaps} ({', '.join(parts)})"


def archive_cell(ok: bool | None, missing: int | None, extra: int | None, differing: int | None) -> str:
    """``-`` (never verified), ``ok``, or the non-zero counts: ``3 missing, 1 extra``."""
    if ok is None:
        return "-"
    if ok:
        return "ok"
    counts = (("missing", missing), ("extra", extra), ("differing", differing))
    return ", ".join(f"{n} {name}" for name, n in counts if n) or "not ok"


def verification_counts(stored: Any) -> tuple[bool | None, int | None, int | None, int | None]:
    """(ok, missing, extra, differing) of a stored Match.archive_verification (Nones when absent)."""
    if not isinstance(stored, dict) or not isinstance(stored.get("ok"), bool):
        return None, None, None, None

    def count(name: str) -> int:
        n = stored.get(f"{name}_count")
        return n if isinstance(n, int) else len(stored.get(name) or [])

    return stored["ok"], count("missing"), count("extra"), count("differing")


def _select(
    match_id: str | None,
    *,
    redis_ids: Iterable[str],
    settings: KickoffSettings,
    now: datetime,
    match_ids: Sequence[str] | None = None,
) -> list[MatchOnBoard]:
    if match_id is not None:
        found = board_row_of_match(uuid.UUID(match_id))
        if not found:
            raise MatchNotFound(f"no match with id {match_id}")
        return found
    if match_ids is not None:
        return board_rows_of_matches(match_ids)
    return board_rows(
        redis_ids=sorted(redis_ids),
        always=sorted(DISPATCH_ALWAYS),
        in_window=sorted(DISPATCH_IN_WINDOW),
        window_from=now - timedelta(seconds=settings.listener_active_max_age_seconds),
        window_to=now + timedelta(minutes=settings.listener_dispatch_within_minutes),
    )


def _db_now() -> datetime:
    """PostgreSQL's clock: every lifecycle time is written and judged by it."""
    return database_now()


@dataclass(eq=False)
class BoardCache:
    """The last full board reading, kept between refreshes of one live board.

    While the change token (``lifecycle.sql.board.board_change_token`` and the matches without a run
    that have Redis keys) stays, a refresh reuses the rows read last and rebuilds only the entries
    that can differ: open runs (heartbeat age and badge move with time alone, and their worker
    lease may go) and matches whose Redis counters changed. Every other entry is the very same
    object as last time.
    """

    token: tuple[Any, ...] | None = None
    found: list[MatchOnBoard] | None = None
    counters: list[tuple[int, bool, bool]] | None = None
    entries: list[BoardEntry] | None = None  # in the order of ``found``
    order: list[int] | None = None  # indexes of ``found``, sorted by league and sr_id
    with_runs: frozenset[str] = frozenset()  # matches of ``found`` with a lifecycle row
    rows: dict[str, Any] = field(default_factory=dict)  # a reader's own row of each entry (the console's)
    full_reads: int = 0


def _change_token(settings: KickoffSettings) -> tuple[datetime, tuple[Any, ...]]:
    return board_change_token(
        always=sorted(DISPATCH_ALWAYS),
        in_window=sorted(DISPATCH_IN_WINDOW),
        max_age_seconds=float(settings.listener_active_max_age_seconds),
        window_seconds=60.0 * settings.listener_dispatch_within_minutes,
    )


def board_badge(
    *,
    ended_at: datetime | None,
    exit_code: int | None,
    heartbeat_at: datetime,
    lease: str | None,
    now: datetime,
    alive: set[str],
    settings: KickoffSettings,
    stopped_by: str | None = None,
) -> str:
    """A run's badge as the board judges it: Late past two heartbeat intervals or with its worker
    lease gone from ``alive``, Stale past the stale threshold, by PostgreSQL's ``now``; a 14 or 15 the
    run reported itself (``stopped_by``) Ended."""
    return str(
        derive_badge(
            ended_at=ended_at,
            exit_code=exit_code,
            heartbeat_at=heartbeat_at,
            now=now,
            stale_after_seconds=settings.listener_heartbeat_stale_seconds,
            late_after_seconds=2 * settings.listener_heartbeat_interval_seconds,
            lease_gone=lease is not None and lease not in alive,
            stopped_by=stopped_by,
        )
    )


def board_entry(
    row: MatchOnBoard,
    counts: tuple[int, bool, bool],
    *,
    now: datetime,
    alive: set[str],
    settings: KickoffSettings,
    degraded: set[str] | frozenset[str] = frozenset(),
) -> BoardEntry:
    """One board entry from its row (lifecycle.sql.board.MatchOnBoard), its Redis counters and the leases;
    ``degraded``: the open runs whose degraded flag is set (``degraded_open_runs``)."""
    attempts, exhausted, pending = counts
    archive_ok, missing, extra, differing = verification_counts(row.archive_verification)
    ended_at = row.ended_at
    if row.record_id is None or row.heartbeat_at is None:
        badge, age = NO_RUN, None
    else:
        badge = board_badge(
            ended_at=ended_at,
            exit_code=row.exit_code,
            heartbeat_at=row.heartbeat_at,
            lease=row.worker_lease,
            now=now,
            alive=alive,
            settings=settings,
            stopped_by=row.stopped_by,
        )
        age = None if ended_at else round((now - row.heartbeat_at).total_seconds(), 1)
    return BoardEntry(
        match_id=row.match_id,
        league=row.league,
        sr_id=row.sr_id,
        match_status=row.status,
        badge=badge,
        record_id=row.record_id,
        heartbeat_age_s=age,
        attempts=attempts,
        exhausted=exhausted,
        pending=pending,
        auto_dispatch=bool(row.auto_dispatch),
        exit_code=row.exit_code if ended_at else None,
        reason=row.exit_reason if ended_at else None,
        host=row.host,
        pid=row.pid,
        gaps=row.gaps,
        gap_seconds=None if row.gap_seconds is None else round(float(row.gap_seconds), 1),
        events_backfilled=row.events_backfilled,
        gaps_unrecovered=row.gaps_unrecovered,
        events_unrecovered=row.events_unrecovered,
        archive_ok=archive_ok,
        archive_missing=missing,
        archive_extra=extra,
        archive_differing=differing,
        archive_verified_at=row.archive_verified_at.isoformat() if row.archive_verified_at else None,
        title=row.title,
        scheduled=row.scheduled.isoformat() if row.scheduled else None,
        run_started_at=row.run_started_at.isoformat() if row.run_started_at else None,
        takeover=row.takeover_path,
        degraded=row.is_open and row.record_id in degraded,
    )


def degraded_open_runs(coordination: CoordinationStore, found: list[MatchOnBoard]) -> set[str]:
    """The open runs among ``found`` whose degraded flag is set (one MGET; none read without an open run)."""
    open_runs = [row.record_id for row in found if row.is_open and row.record_id]
    return coordination.locks.degraded_runs(open_runs) if open_runs else set()


def open_worker_leases(found: list[MatchOnBoard]) -> set[str]:
    """The worker leases the open runs among ``found`` started under."""
    return {row.worker_lease for row in found if row.is_open and row.worker_lease}


def row_counters(
    coordination: CoordinationStore, found: list[MatchOnBoard], redis_ids: set[str] | None
) -> list[Any]:
    """Each row's Redis counters; with ``redis_ids`` (every match with a key) only those are read."""
    if redis_ids is None:
        return coordination.barriers.counters([row.match_id for row in found])
    keyed = [row.match_id for row in found if row.match_id in redis_ids]
    read = dict(zip(keyed, coordination.barriers.counters(keyed), strict=True))
    zero = (0, False, False)
    return [read.get(row.match_id, zero) for row in found]


def listener_board(
    *,
    settings: KickoffSettings,
    coordination: CoordinationStore,
    match_id: str | None = None,
    match_ids: Sequence[str] | None = None,
    active_only: bool = False,
    cache: BoardCache | None = None,
) -> list[BoardEntry]:
    """The board, sorted by league and sr_id; see the module docstring for who is on it.

    ``match_id`` shows that match whatever it has (MatchNotFound when it does not exist);
    ``match_ids`` shows exactly those matches (unknown ids are left out), e.g. every match of
    ``kickoff matches list``, so both show the same badge.
    ``active_only`` keeps matches with an open run or a pending start. An open run is Late when
    its heartbeat is older than two heartbeat intervals or its worker lease is gone from Redis;
    Stale past the stale threshold. Ages are judged by PostgreSQL's clock.
    ``cache`` (the full board only) keeps the reading for the next call: see BoardCache.
    """
    whole = match_id is None and match_ids is None
    redis_ids = coordination.barriers.matches_with_keys() if whole else set()
    if cache is not None and whole:
        now, token = _change_token(settings)
        # a match with a run is on the board whatever its Redis keys: only the others' keys count
        token = (*token, frozenset(redis_ids - cache.with_runs))
        if cache.token != token or cache.found is None:
            cache.token, cache.found, cache.entries, cache.order = None, None, None, None
            cache.found = _select(None, redis_ids=redis_ids, settings=settings, now=now)
            cache.with_runs = frozenset(row.match_id for row in cache.found if row.record_id is not None)
            cache.token = (*token[:-1], frozenset(redis_ids - cache.with_runs))
            cache.full_reads += 1
        found = cache.found
    else:
        found = _select(match_id, redis_ids=redis_ids, settings=settings, now=_db_now(), match_ids=match_ids)
    release_connection()
    open_leases = open_worker_leases(found)
    alive = coordination.locks.live_worker_leases(open_leases)[0] if open_leases else set()
    counters = row_counters(coordination, found, redis_ids if whole else None)
    degraded = degraded_open_runs(coordination, found)
    if cache is not None and whole:
        reuse = cache.entries if cache.entries is not None and cache.counters is not None else None
        entries = [
            reuse[i]
            if reuse is not None and not row.is_open and cache.counters[i] == counts  # type: ignore[index]
            else board_entry(row, counts, now=now, alive=alive, settings=settings, degraded=degraded)
            for i, (row, counts) in enumerate(zip(found, counters, strict=True))
        ]
        if cache.order is None:
            cache.order = sorted(range(len(entries)), key=lambda i: (entries[i].league, entries[i].sr_id))
        cache.entries, cache.counters = entries, counters
        ordered = [entries[i] for i in cache.order]
    else:
        ordered = sorted(
            (
                board_entry(row, counts, now=row.now, alive=alive, settings=settings, degraded=degraded)
                for row, counts in zip(found, counters, strict=True)
            ),
            key=lambda e: (e.league, e.sr_id),
        )
    if active_only:
        ordered = [e for e in ordered if e.is_open or e.pending]
    return ordered
