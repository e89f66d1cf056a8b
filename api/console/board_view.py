"""The listener board as the console shows it: listener_board's entries, filtered, with start times."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from config.settings import KickoffSettings
from lifecycle.board import BoardCache, BoardEntry, listener_board
from models.badges import Badge
from models.coordination import CoordinationStore
from models.db import release_connection
from models.match import scheduled_of_matches

#: Badges during which Start is disabled: a listener is running (the spec: "admin disables Start
#: while Running"); Late is an open row whose heartbeat is late but not stale, still running.
START_DISABLED = frozenset({Badge.RUNNING.value, Badge.LATE.value})


@dataclass(frozen=True)
class BoardFilter:
    """What the operator asked to see: active only or all, one league, an sr_id substring."""

    active: bool = False
    league: str = ""
    q: str = ""

    def keeps(self, entry: BoardEntry) -> bool:
        if self.league and entry.league != self.league:
            return False
        return not self.q or self.q.lower() in entry.sr_id.lower()


@dataclass(frozen=True)
class BoardRow:
    """One row: the board entry and the match's scheduled start."""

    entry: BoardEntry
    scheduled: datetime | None

    @property
    def start_disabled(self) -> bool:
        return self.entry.badge in START_DISABLED


@dataclass(eq=False)
class RowsCache:
    """A live board's last reading (see lifecycle.board.BoardCache) and its rows by match id.

    A row is kept while its entry is the very same object as last time, so an unchanged match is
    not compared field by field; within one SQL reading (``reading``: the board cache's
    ``full_reads`` then) no start time is looked up again.
    """

    board: BoardCache = field(default_factory=BoardCache)
    rows: dict[str, BoardRow] = field(default_factory=dict)
    reading: int = -1


def board_rows(
    flt: BoardFilter,
    *,
    settings: KickoffSettings,
    barriers: CoordinationStore,
    cache: RowsCache | None = None,
) -> tuple[list[BoardRow], list[str]]:
    """The filtered rows and every league on the unfiltered board (for the league filter).

    ``cache`` (a live board's, kept between refreshes) reads only what changed since.
    """
    entries = listener_board(
        settings=settings,
        barriers=barriers,
        active_only=flt.active,
        cache=None if cache is None else cache.board,
    )
    leagues = sorted({e.league for e in entries})
    kept = [e for e in entries if flt.keeps(e)]
    # within one SQL reading of the cache a match's start time is as it was: only new matches ask
    known = cache.rows if cache is not None and cache.reading == cache.board.full_reads else {}
    kept_rows: list[BoardRow | None] = []
    for e in kept:
        last = known.get(e.match_id)
        kept_rows.append(None if last is None else last if last.entry is e else BoardRow(e, last.scheduled))
    new_ids = [e.match_id for e, row in zip(kept, kept_rows, strict=True) if row is None]
    try:
        when = scheduled_of_matches(new_ids)
    finally:
        release_connection()
    rows = [row or BoardRow(e, when.get(e.match_id)) for e, row in zip(kept, kept_rows, strict=True)]
    if cache is not None:
        cache.rows, cache.reading = {row.entry.match_id: row for row in rows}, cache.board.full_reads
    return rows, leagues
