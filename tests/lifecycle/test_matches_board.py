"""The Matches board (lifecycle.matches_board) against real PostgreSQL and Redis."""

from __future__ import annotations

from datetime import timedelta

import pytest

from config.clock import utcnow
from config.errors import InvalidQuery
from lifecycle.board import NO_RUN, listener_board
from lifecycle.matches_board import MatchesCache, matches_page, matches_query, window_entries
from models import League
from models.listener_record import MatchListenerRecord
from models.team import Team


@pytest.fixture
def page(lsettings, lcoordination, db):
    """``page(**typed)``: the Matches board's page for the parameters as typed (today: the real date)."""

    def read(cache: MatchesCache | None = None, **typed: str):
        query = matches_query(today=utcnow().date(), **typed)
        return matches_page(query, settings=lsettings, coordination=lcoordination, cache=cache)

    return read


def _teams(league: str, *teams: tuple[str, str, str]) -> None:
    lg, _ = League.get_or_create(name=league)
    for alias, market, name in teams:
        Team.create(league=lg, sr_id=f"sr:team:{alias}", alias=alias, market=market, name=name)


def test_a_match_due_tomorrow_that_never_had_a_run_is_listed_and_the_listener_board_does_not_know_it(
    page, make_match, lsettings, lcoordination
):
    tomorrow = make_match("mlb", title="HOU @ KC", status="scheduled", scheduled=utcnow() + timedelta(days=1))
    [entry] = page().entries
    assert (entry.match_id, entry.title, entry.league) == (str(tomorrow.id), "HOU @ KC", "mlb")
    assert entry.badge == NO_RUN
    assert entry.auto_dispatch and entry.record_id is None and entry.run_started_at is None
    assert entry.scheduled == tomorrow.scheduled.isoformat()
    assert listener_board(settings=lsettings, coordination=lcoordination) == []


def test_the_default_window_is_yesterday_to_two_days_ahead_in_utc_days(page, make_match):
    today = utcnow().replace(hour=12, minute=0, second=0, microsecond=0)
    inside = {
        make_match(sr_id=f"sr:match:in{d}", scheduled=today + timedelta(days=d)).sr_id for d in (-1, 0, 1, 2)
    }
    for d in (-2, 3):
        make_match(sr_id=f"sr:match:out{d}", scheduled=today + timedelta(days=d))
    shown = page()
    assert {e.sr_id for e in shown.entries} == inside and shown.in_window == 4
    wider = page(day_from=(today - timedelta(days=2)).date().isoformat())
    assert {e.sr_id for e in wider.entries} == inside | {"sr:match:out-2"}


def test_search_finds_a_match_by_a_team_name_market_alias_title_or_sr_id_case_insensitively(page, make_match):
    _teams(
        "mlb", ("HOU", "Houston", "Astros"), ("KC", "Kansas City", "Royals"), ("NYY", "New York", "Yankees")
    )
    kc = make_match("mlb", sr_id="sr:match:kc1", title="HOU @ KC")
    make_match("mlb", sr_id="sr:match:ny1", title="NYY @ BOS")
    for text in ("royals", "Kansas City", "astros", "hou @ kc", "KC1", "sr:match:kc"):
        assert [e.match_id for e in page(q=text).entries] == [str(kc.id)], text
    assert page(q="Yankees").total == 1 and page(q="Padres").total == 0


def test_search_text_is_plain_text_quotes_percent_and_markup_match_only_themselves(page, make_match):
    odd = make_match("nfl", title='O\'Brien "50%" <script>alert(1)</script>')
    make_match("nfl", title="BUF @ KC")
    for text in ("'", '"50%"', "%", "<script>", "alert(1)"):
        assert [e.match_id for e in page(q=text).entries] == [str(odd.id)], text
    assert page(q="_").total == 0 and page(q="x" * 2000).total == 0


def test_filters_by_league_status_and_badge_and_sorts_and_pages(page, make_match):
    now = utcnow()
    running = make_match("nhl", title="STL @ NSH", status="inprogress", scheduled=now - timedelta(hours=1))
    MatchListenerRecord.create(match=running.id)
    ended = make_match("nhl", title="BOS @ TOR", status="closed", scheduled=now - timedelta(hours=5))
    MatchListenerRecord.create(match=ended.id, ended_at=now, exit_code=0)
    for n in range(5):
        make_match("mlb", title=f"G{n}", scheduled=now + timedelta(hours=n + 1))
    assert page(league="nhl").total == 2
    assert [e.match_id for e in page(status="inprogress").entries] == [str(running.id)]
    assert [e.match_id for e in page(badge="Ended").entries] == [str(ended.id)]
    assert page(badge=NO_RUN).total == 5
    assert page().badges == {"Running": 1, "Ended": 1, NO_RUN: 5}
    by_title = [e.title for e in page(sort="title").entries]
    assert by_title == sorted(by_title, key=str.lower)
    newest_first = [e.scheduled for e in page(sort="scheduled", direction="desc").entries]
    assert newest_first == sorted(newest_first, reverse=True)
    first = page(per="25")
    assert (first.pages, first.first, first.last, first.total) == (1, 1, 7, 7)
    assert [e.title for e in page(sort="title", league="mlb").entries] == ["G0", "G1", "G2", "G3", "G4"]


def test_pages_split_the_sorted_matches_and_the_last_one_holds_the_rest(page, make_match):
    now = utcnow()
    for n in range(30):
        make_match(sr_id=f"sr:match:p{n:02d}", scheduled=now + timedelta(minutes=n))
    one, two = page(per="25"), page(per="25", page="2")
    assert (one.pages, len(one.entries), len(two.entries), two.first, two.last) == (2, 25, 5, 26, 30)
    assert [e.sr_id for e in one.entries + two.entries] == [f"sr:match:p{n:02d}" for n in range(30)]


def test_a_page_past_the_end_is_refused_saying_how_many_pages_there_are(page, make_match):
    make_match()
    with pytest.raises(InvalidQuery, match="page 3 is past the end: 1 matches make 1 page of 100") as caught:
        page(page="3")
    assert caught.value.field == "page"
    assert page(page="1").total == 1


def test_an_empty_window_still_has_its_first_page(page):
    empty = page()
    assert (empty.total, empty.pages, empty.first, empty.last, empty.entries) == (0, 1, 0, 0, [])


@pytest.mark.parametrize(
    ("typed", "field", "words"),
    [
        ({"day_from": "2030-13-01"}, "from", "must be a date like"),
        ({"day_to": "tomorrow"}, "to", "must be a date like"),
        ({"day_from": "2030-01-10", "day_to": "2030-01-01"}, "to", "is before from"),
        ({"day_from": "2030-01-01", "day_to": "2030-03-01"}, "to", "at most 31 days"),
        ({"status": "halfway"}, "status", "unknown match status"),
        ({"badge": "Sleeping"}, "badge", "unknown badge"),
        ({"sort": "colour"}, "sort", "unknown sort"),
        ({"direction": "sideways"}, "dir", "asc or desc"),
        ({"per": "7"}, "per", "per is one of 25, 50, 100, 200"),
        ({"page": "0"}, "page", "page starts at 1"),
        ({"page": "-1"}, "page", "whole number"),
        ({"page": "1e9"}, "page", "whole number"),
        ({"q": "x" * 2001}, "q", "at most 2000 characters"),
        ({"league": "cricket"}, "league", "no league named 'cricket'"),
    ],
)
def test_each_bad_parameter_is_refused_naming_it(typed, field, words):
    with pytest.raises(InvalidQuery, match=words) as caught:
        matches_query(today=utcnow().date(), leagues=["mlb", "nfl"], **typed)
    assert caught.value.field == field


def test_a_cached_reading_rereads_the_window_only_when_a_table_changed_and_rebuilds_open_runs(
    lsettings, lcoordination, make_match
):
    day = utcnow().date()
    match = make_match(title="HOU @ KC", status="inprogress")
    cache = MatchesCache()
    first, _ = window_entries(day, day, settings=lsettings, coordination=lcoordination, cache=cache)
    again, _ = window_entries(day, day, settings=lsettings, coordination=lcoordination, cache=cache)
    assert cache.full_reads == 1 and again[0] is first[0]  # nothing changed: the same entry object
    MatchListenerRecord.create(match=match.id)
    moved, _ = window_entries(day, day, settings=lsettings, coordination=lcoordination, cache=cache)
    assert cache.full_reads == 2 and moved[0].badge == "Running"
    open_again, _ = window_entries(day, day, settings=lsettings, coordination=lcoordination, cache=cache)
    assert cache.full_reads == 2 and open_again[0] is not moved[0]  # an open run is rebuilt each time
    lcoordination.barriers.record_failed_attempt(match.id)
    counted, _ = window_entries(day, day, settings=lsettings, coordination=lcoordination, cache=cache)
    assert cache.full_reads == 2 and counted[0].attempts == 1  # Redis counters are read every time


def test_a_team_added_later_is_found_by_a_cached_reading(lsettings, lcoordination, make_match):
    match = make_match("mlb", title="SEA @ OAK")
    cache = MatchesCache()
    query = matches_query(today=utcnow().date(), q="Mariners")
    assert matches_page(query, settings=lsettings, coordination=lcoordination, cache=cache).total == 0
    _teams("mlb", ("SEA", "Seattle", "Mariners"))
    found = matches_page(query, settings=lsettings, coordination=lcoordination, cache=cache)
    assert [e.match_id for e in found.entries] == [str(match.id)] and cache.full_reads == 2
