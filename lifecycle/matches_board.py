"""The spec's Matches board: every match scheduled in a window, filtered, searched, sorted and paged.

Unlike the listener board (lifecycle.board), which lists the matches a listener has touched, this
one lists every match whose scheduled start falls in the window, a match that never had a run
too (badge ``-``). Each entry is the listener board's (lifecycle.board.BoardEntry: title, league,
status, badge, dispatch, newest run and its gaps, degraded) read with the same query and the same
badge rules. The search looks through the title, the sr_id and the names of the teams the title
names by alias ("HOU @ KC" is found by "Royals" and "Kansas City" when the league's teams are
known), case-insensitively, as plain text: quotes, ``%`` and markup are ordinary characters.

A live board passes a MatchesCache: a refresh reads a change token (row count and xmin sum of
``matches``, ``match_listener_records``, ``leagues`` and ``teams``) and reads the window again only
when it moved; otherwise it rebuilds the open runs (their badge moves with time alone) and the
matches whose Redis counters changed, as the listener board's BoardCache does.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta
from typing import Any

from config.errors import InvalidQuery
from config.settings import KickoffSettings
from lifecycle.board import (
    NO_RUN,
    BoardEntry,
    board_entry,
    degraded_open_runs,
    open_worker_leases,
    row_counters,
)
from lifecycle.leagues import league_names
from lifecycle.sql.board import MatchOnBoard, team_names_by_alias, window_change_token, window_rows
from models.badges import Badge
from models.coordination import CoordinationStore
from models.db import release_connection
from models.status import KNOWN

#: The badges a filter may name (``-``: no run), as the bulk action's.
BADGES = (*(b.value for b in Badge), NO_RUN)
#: The match statuses a filter may name.
STATUSES = tuple(sorted(KNOWN))
#: Rows per page an operator may choose, and the default.
PAGE_SIZES = (25, 50, 100, 200)
DEFAULT_PAGE_SIZE = 100
#: The longest window (days) and search text (characters) a query may ask for.
MAX_WINDOW_DAYS = 31
MAX_SEARCH = 2000
#: The default window: from yesterday to two days ahead (UTC days, both included).
DEFAULT_DAYS_BEFORE = 1
DEFAULT_DAYS_AFTER = 2


def _text(value: str | None) -> str:
    return (value or "").lower()


#: Sort keys: name -> the entry's key (ties: scheduled start, then sr_id).
SORTS: dict[str, Callable[[BoardEntry], Any]] = {
    "scheduled": lambda e: (e.scheduled or "", e.sr_id),
    "title": lambda e: (_text(e.title or e.sr_id), e.scheduled or "", e.sr_id),
    "league": lambda e: (e.league, e.scheduled or "", e.sr_id),
    "status": lambda e: (e.match_status, e.scheduled or "", e.sr_id),
    "badge": lambda e: (e.badge, e.scheduled or "", e.sr_id),
    "dispatch": lambda e: (e.auto_dispatch, e.scheduled or "", e.sr_id),
    "last_run": lambda e: (e.run_started_at or "", e.scheduled or "", e.sr_id),
    "sr_id": lambda e: (e.sr_id,),
}


@dataclass(frozen=True)
class MatchesQuery:
    """What the operator asked to see: a window of UTC days (both included), filters, sort and page."""

    day_from: date
    day_to: date
    league: str = ""
    status: str = ""
    badge: str = ""
    q: str = ""
    sort: str = "scheduled"
    descending: bool = False
    page: int = 1
    per_page: int = DEFAULT_PAGE_SIZE

    @property
    def window(self) -> tuple[datetime, datetime]:
        """[start of ``day_from``, start of the day after ``day_to``) in UTC."""
        start = datetime.combine(self.day_from, time(), tzinfo=UTC)
        end = datetime.combine(self.day_to + timedelta(days=1), time(), tzinfo=UTC)
        return start, end

    def params(self, **changes: Any) -> dict[str, str]:
        """The query as URL parameters (``changes`` replace fields, e.g. ``page=2``)."""
        values = {**self.__dict__, **changes}
        out = {
            "from": values["day_from"].isoformat(),
            "to": values["day_to"].isoformat(),
            "league": values["league"],
            "status": values["status"],
            "badge": values["badge"],
            "q": values["q"],
            "sort": values["sort"],
            "dir": "desc" if values["descending"] else "asc",
            "page": str(values["page"]),
            "per": str(values["per_page"]),
        }
        return {k: v for k, v in out.items() if v != ""}

    def keeps(self, entry: BoardEntry, search: str) -> bool:
        """Whether ``entry`` (``search``: its lowercased search text) passes the filters."""
        if self.league and entry.league != self.league:
            return False
        if self.status and entry.match_status != self.status:
            return False
        if self.badge and entry.badge != self.badge:
            return False
        return not self.q or self.q.lower() in search


def _day(value: str, *, name: str, default: date) -> date:
    text = value.strip()
    if not text:
        return default
    try:
        return date.fromisoformat(text)
    except ValueError:
        raise InvalidQuery(f"{name} must be a date like 2030-09-07, not {text[:40]!r}", field=name) from None


def _whole(value: str, *, name: str, default: int) -> int:
    text = value.strip()
    if not text:
        return default
    if not text.isdigit() or len(text) > 9:
        raise InvalidQuery(f"{name} must be a whole number from 1, not {text[:40]!r}", field=name)
    return int(text)


def matches_query(
    *,
    today: date,
    day_from: str = "",
    day_to: str = "",
    league: str = "",
    status: str = "",
    badge: str = "",
    q: str = "",
    sort: str = "",
    direction: str = "",
    page: str = "",
    per: str = "",
    leagues: list[str] | None = None,
) -> MatchesQuery:
    """A MatchesQuery from the page's text parameters; InvalidQuery (422) naming the first bad one.

    ``leagues``: the known league names (an unknown league is refused; None: not checked).
    """
    start = _day(day_from, name="from", default=today - timedelta(days=DEFAULT_DAYS_BEFORE))
    end = _day(day_to, name="to", default=today + timedelta(days=DEFAULT_DAYS_AFTER))
    if end < start:
        raise InvalidQuery(f"to ({end}) is before from ({start})", field="to")
    if (end - start).days + 1 > MAX_WINDOW_DAYS:
        raise InvalidQuery(f"the window is at most {MAX_WINDOW_DAYS} days: narrow from and to", field="to")
    league, status, badge = league.strip(), status.strip(), badge.strip()
    if league and leagues is not None and league not in leagues:
        raise InvalidQuery(f"no league named {league[:80]!r}", field="league")
    if status and status not in STATUSES:
        raise InvalidQuery(
            f"unknown match status {status[:40]!r} (one of {', '.join(STATUSES)})", field="status"
        )
    if badge and badge not in BADGES:
        raise InvalidQuery(f"unknown badge {badge[:40]!r} (one of {', '.join(BADGES)})", field="badge")
    if len(q) > MAX_SEARCH:
        raise InvalidQuery(f"the search is at most {MAX_SEARCH} characters, not {len(q)}", field="q")
    sort = sort.strip() or "scheduled"
    if sort not in SORTS:
        raise InvalidQuery(f"unknown sort {sort[:40]!r} (one of {', '.join(SORTS)})", field="sort")
    direction = direction.strip() or "asc"
    if direction not in ("asc", "desc"):
        raise InvalidQuery(f"dir is asc or desc, not {direction[:40]!r}", field="dir")
    per_page = _whole(per, name="per", default=DEFAULT_PAGE_SIZE)
    if per_page not in PAGE_SIZES:
        raise InvalidQuery(f"per is one of {', '.join(map(str, PAGE_SIZES))}, not {per_page}", field="per")
    number = _whole(page, name="page", default=1)
    if number < 1:
        raise InvalidQuery("page starts at 1", field="page")
    return MatchesQuery(
        day_from=start,
        day_to=end,
        league=league,
        status=status,
        badge=badge,
        q=q.strip(),
        sort=sort,
        descending=direction == "desc",
        page=number,
        per_page=per_page,
    )


@dataclass(frozen=True)
class MatchesPage:
    """One page of the Matches board: its entries, how many matched, and the choices of the filters."""

    query: MatchesQuery
    entries: list[BoardEntry]
    total: int  # matches that pass the filters (every page)
    in_window: int  # matches scheduled in the window
    badges: dict[str, int]  # badge -> matches that pass the filters
    leagues: list[str]

    @property
    def pages(self) -> int:
        return max(1, -(-self.total // self.query.per_page))

    @property
    def first(self) -> int:
        """1-based position of the page's first entry (0 on an empty page)."""
        return (self.query.page - 1) * self.query.per_page + 1 if self.entries else 0

    @property
    def last(self) -> int:
        return self.first + len(self.entries) - 1 if self.entries else 0


@dataclass(eq=False)
class MatchesCache:
    """A live Matches board's last reading of one window, kept between refreshes."""

    token: tuple[Any, ...] | None = None
    found: list[MatchOnBoard] | None = None
    search: list[str] = field(default_factory=list)  # lowercased search text, in the order of ``found``
    teams: dict[tuple[str, str], str] = field(default_factory=dict)  # the teams the search texts know
    counters: list[Any] | None = None
    entries: list[BoardEntry] | None = None
    full_reads: int = 0
    rows: dict[str, Any] = field(default_factory=dict)  # a reader's own row of each entry (the console's)


def _search_text(row: MatchOnBoard, teams: dict[tuple[str, str], str]) -> str:
    """Title, sr_id and the names of the teams the title names by alias, lowercased."""
    league, sr_id, title = row.league, row.sr_id, row.title
    parts = [title or "", sr_id]
    for word in (title or "").replace(",", " ").split():
        name = teams.get((league, word))
        if name:
            parts.append(name)
    return " ".join(parts).lower()


def window_entries(
    day_from: date,
    day_to: date,
    *,
    settings: KickoffSettings,
    coordination: CoordinationStore,
    cache: MatchesCache | None = None,
) -> tuple[list[BoardEntry], list[str]]:
    """Every match scheduled in the window as a board entry, and each one's lowercased search text.

    ``cache`` (a live board's, for this window only) reads the window again only when the change
    token moved; see the module docstring.
    """
    window = MatchesQuery(day_from, day_to).window
    cache = cache if cache is not None else MatchesCache()
    now, token = window_change_token()
    token = (*token, window)
    reuse: list[BoardEntry | None] | None = cache.entries if cache.counters is not None else None
    if cache.token != token or cache.found is None:
        # a table moved (a heartbeat, often): the rows that read the same as last time keep their entry
        before = {} if cache.found is None else _by_match(cache.found, cache.entries, cache.counters)
        found = window_rows(window_from=window[0], window_to=window[1])
        teams = team_names_by_alias()
        # a match's search text is kept while its row and the teams read the same
        search: dict[str, str] = {}
        if teams == cache.teams:
            search = {row.match_id: text for row, text in zip(cache.found or [], cache.search, strict=True)}
        cache.teams = teams
        kept = [before.get(row.match_id) for row in found]
        same = [k is not None and k[0].same_as(row) for k, row in zip(kept, found, strict=True)]
        cache.search = [
            search[row.match_id] if ok and row.match_id in search else _search_text(row, teams)
            for row, ok in zip(found, same, strict=True)
        ]
        reuse = [k[1] if ok and k is not None else None for k, ok in zip(kept, same, strict=True)]
        cache.counters = [k[2] if ok and k is not None else None for k, ok in zip(kept, same, strict=True)]
        cache.found, cache.token = found, token
        cache.full_reads += 1
    release_connection()
    found = cache.found
    redis_ids = coordination.barriers.matches_with_keys()
    open_leases = open_worker_leases(found)
    alive = coordination.locks.live_worker_leases(open_leases)[0] if open_leases else set()
    counters = row_counters(coordination, found, redis_ids)
    degraded = degraded_open_runs(coordination, found)
    entries = [
        reuse[i]  # type: ignore[misc]
        if reuse is not None and reuse[i] is not None and not row.is_open and cache.counters[i] == counts  # type: ignore[index]
        else board_entry(row, counts, now=now, alive=alive, settings=settings, degraded=degraded)
        for i, (row, counts) in enumerate(zip(found, counters, strict=True))
    ]
    cache.entries, cache.counters = entries, counters
    return entries, cache.search


def _by_match(
    found: list[MatchOnBoard], entries: list[BoardEntry] | None, counters: list[Any] | None
) -> dict[str, tuple[MatchOnBoard, BoardEntry | None, Any]]:
    """Match id -> (its last row, its entry, its counters) of the last reading."""
    if entries is None or counters is None:
        return {row.match_id: (row, None, None) for row in found}
    return {row.match_id: (row, e, c) for row, e, c in zip(found, entries, counters, strict=True)}


def matches_page(
    query: MatchesQuery,
    *,
    settings: KickoffSettings,
    coordination: CoordinationStore,
    cache: MatchesCache | None = None,
    leagues: list[str] | None = None,
) -> MatchesPage:
    """The page ``query`` asks for; InvalidQuery (422) when its page is past the end.

    ``leagues`` (every league's name; read when None) fills the league filter's choices.
    """
    entries, search = window_entries(
        query.day_from, query.day_to, settings=settings, coordination=coordination, cache=cache
    )
    kept = [e for e, text in zip(entries, search, strict=True) if query.keeps(e, text)]
    kept.sort(key=SORTS[query.sort], reverse=query.descending)
    pages = max(1, -(-len(kept) // query.per_page))
    if query.page > pages:
        raise InvalidQuery(
            f"page {query.page} is past the end: {len(kept)} matches make {pages} "
            f"page{'s' if pages != 1 else ''} of {query.per_page}",
            field="page",
        )
    start = (query.page - 1) * query.per_page
    if leagues is None:
        leagues = league_names()
        release_connection()
    return MatchesPage(
        query=query,
        entries=kept[start : start + query.per_page],
        total=len(kept),
        in_window=len(entries),
        badges=dict(Counter(e.badge for e in kept)),
        leagues=leagues,
    )
