"""The boards' rows as the console shows them: the listener board filtered, the Matches board's page."""

from __future__ import annotations

from dataclasses import dataclass
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
    """What the operator asked to see: active only or all, one league, a title or sr_id substring."""

    active: bool = False
    league: str = ""
    q: str = ""

    def keeps(self, entry: BoardEntry) -> bool:
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
    barriers: CoordinationStore,
    cache: BoardCache | None = None,
) -> tuple[list[BoardRow], list[str]]:
    """The filtered rows and every league on the unfiltered board (for the league filter).

    ``cache`` (a live board's, kept between refreshes) reads only what changed since.
    """
    entries = listener_board(settings=settings, barriers=barriers, active_only=flt.active, cache=cache)
    leagues = sorted({e.league for e in entries})
    return [BoardRow(e) for e in entries if flt.keeps(e)], leagues


def matches_rows(
    query: MatchesQuery,
    *,
    settings: KickoffSettings,
    barriers: CoordinationStore,
    cache: MatchesCache | None = None,
    leagues: list[str] | None = None,
) -> tuple[list[BoardRow], MatchesPage]:
    """The Matches board's page of ``query`` as rows, and the page (totals, choices)."""
    page = matches_page(query, settings=settings, barriers=barriers, cache=cache, leagues=leagues)
    return [BoardRow(e) for e in page.entries], page


def matches_url(query: MatchesQuery, **changes: object) -> str:
    """The Matches board's address for ``query`` (``changes``: fields replaced, e.g. ``page=2``)."""
    return "/matches?" + urlencode(query.params(**changes))
