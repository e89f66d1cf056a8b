"""The boards' rows as the console shows them: the listener board filtered, the Matches board's page."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import date
from urllib.parse import urlencode

from config.settings import KickoffSettings
from lifecycle.board import BoardCache, BoardEntry, listener_board
from lifecycle.matches_board import MatchesCache, MatchesPage, MatchesQuery, matches_page
from models.badges import Badge
from models.coordination import CoordinationStore

#: Badges during which Start is disabled: a listener is running (the spec: "admin disables Start
#: while Running"); Late is an open row whose heartbeat is late but not stale, still running.
START_DISABLED = frozenset({Badge.RUNNING.value, Badge.LATE.value})


@dataclass(frozen=True)
class BoardFilter:
    """What the operator asked to see: active only or all, one league, a title or sr_id substring; and the
    session's league limit (``within``), which no query widens."""

    active: bool = False
    league: str = ""
    q: str = ""
    within: tuple[str, ...] | None = None  # the session key's leagues, casefolded (None: every league)

    def limited_to(self, leagues: tuple[str, ...] | None) -> BoardFilter:
        """This filter inside the league limit ``leagues`` (a session's key's; None: no limit)."""
        if leagues is None:
            return self
        return replace(self, within=tuple(sorted({x.casefold() for x in leagues})))

    def allows(self, league: str) -> bool:
        """Whether the league limit lets ``league``'s rows be seen."""
        return self.within is None or league.casefold() in self.within

    def keeps(self, entry: BoardEntry) -> bool:
        if not self.allows(entry.league):
            return False
        if self.league and entry.league != self.league:
            return False
        if not self.q:
            return True
        q = self.q.lower()
        return q in entry.sr_id.lower() or q in (entry.title or "").lower()


@dataclass(frozen=True)
class BoardRow:
    """One row of either board: the board entry (title, league, scheduled start, badge, newest run)."""

    entry: BoardEntry

    @property
    def scheduled(self) -> str | None:
        return self.entry.scheduled

    @property
    def start_disabled(self) -> bool:
        return self.entry.badge in START_DISABLED


def board_rows(
    flt: BoardFilter,
    *,
    settings: KickoffSettings,
    coordination: CoordinationStore,
    cache: BoardCache | None = None,
) -> tuple[list[BoardRow], list[str]]:
    """The filtered rows and every league on the unfiltered board (for the league filter).

    ``cache`` (a live board's, kept between refreshes) reads only what changed since.
    """
    entries = listener_board(
        settings=settings, coordination=coordination, active_only=flt.active, cache=cache
    )
    leagues = sorted({e.league for e in entries if flt.allows(e.league)})
    filtered = flt.league or flt.q or flt.within is not None
    kept = [e for e in entries if flt.keeps(e)] if filtered else entries
    return rows_of(kept, cache), leagues


def rows_of(entries: list[BoardEntry], cache: BoardCache | MatchesCache | None) -> list[BoardRow]:
    """The rows of ``entries``; with a live board's ``cache``, an entry that is the very object it was last
    time keeps its very row (the feed then knows it unchanged without comparing it)."""
    if cache is None:
        return [BoardRow(e) for e in entries]
    last, rows = cache.rows, {}
    out = []
    for e in entries:
        row = last.get(e.match_id)
        if row is None or row.entry is not e:
            row = BoardRow(e)
        rows[e.match_id] = row
        out.append(row)
    cache.rows = rows
    return out


def matches_rows(
    query: MatchesQuery,
    *,
    settings: KickoffSettings,
    coordination: CoordinationStore,
    cache: MatchesCache | None = None,
    leagues: list[str] | None = None,
) -> tuple[list[BoardRow], MatchesPage]:
    """The Matches board's page of ``query`` as rows, and the page (totals, choices)."""
    page = matches_page(query, settings=settings, coordination=coordination, cache=cache, leagues=leagues)
    return rows_of(page.entries, cache), page


def matches_url(query: MatchesQuery, **changes: object) -> str:
    """The Matches board's address for ``query`` (``changes``: fields replaced, e.g. ``page=2``)."""
    return "/matches?" + urlencode(query.params(**changes))


class WindowCaches:
    """The Matches board pages' readings: a MatchesCache for each of the ``limit`` windows asked for
    last, used by one request at a time, so a page load reads the window again only when it changed
    (see lifecycle.matches_board)."""

    def __init__(self, limit: int = 4) -> None:
        self.limit = limit
        self._mu = threading.Lock()
        self._caches: OrderedDict[tuple[date, date], tuple[threading.Lock, MatchesCache]] = OrderedDict()

    @contextmanager
    def of(self, query: MatchesQuery) -> Iterator[MatchesCache]:
        """The cache of ``query``'s window, held by this request until the block ends."""
        key = (query.day_from, query.day_to)
        with self._mu:
            entry = self._caches.pop(key, None) or (threading.Lock(), MatchesCache())
            self._caches[key] = entry
            while len(self._caches) > self.limit:
                self._caches.popitem(last=False)
        with entry[0]:
            yield entry[1]
