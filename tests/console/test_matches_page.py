"""The Matches board and the History page over HTTP: listing, search, refusals, escaping, the stream, bulk
on ticked rows, and titles beside ids on every page that shows a match."""

from __future__ import annotations

import html
import re
from datetime import timedelta

import pytest
from markupsafe import escape

from config.clock import utcnow
from models import League, Match
from models.audit import audit_entries
from models.history_series import SERIES
from models.listener_record import MatchListenerRecord
from models.team import Team

pytestmark = pytest.mark.services

CONFIRM_IN_PAGE = re.compile(r'name="confirm" value="([^"]+)"')


def _tomorrow(make_match, title: str = "HOU @ KC", league: str = "mlbc") -> Match:
    return make_match(league, title=title, status="scheduled", scheduled=utcnow() + timedelta(days=1))


def _row_ids(page: str) -> list[str]:
    return re.findall(r'<tr data-match-id="([^"]+)"', page)


def test_a_match_that_never_had_a_run_due_tomorrow_is_listed_with_its_title_and_actions(
    console_server, console_keys, signed_in, make_match
):
    match = _tomorrow(make_match)
    op = signed_in(console_keys["operator"])
    page = op.client.get("/matches")
    assert page.status_code == 200, page.text
    assert _row_ids(page.text) == [str(match.id)]
    assert f'data-match-id="{match.id}" data-badge="-" data-dispatch="on"' in page.text
    assert ">HOU @ KC</a>" in page.text and match.sr_id in page.text and "never" in page.text
    assert f'action="/matches/{match.id}/start"' in page.text and "Select HOU @ KC (mlbc)" in page.text
    assert op.client.get("/").text.count("data-match-id=") == 0  # the listener board does not list it

    off = op.client.post(
        f"/matches/{match.id}/auto-dispatch",
        data={"csrf_token": op.csrf, "on": "0", "reason": "not this one", "next": "/matches?q=KC"},
    )
    assert off.status_code == 303 and off.headers["location"].startswith("/matches?q=KC&notice=")
    assert not Match.get_by_id(match.id).auto_dispatch_listener
    [entry] = audit_entries(action="match.dispatch_off")
    assert entry.reason == "not this one" and entry.title == "HOU @ KC (mlbc)"
    assert 'data-dispatch="off"' in op.client.get("/matches").text


def test_search_by_team_name_title_or_sr_id_and_each_filter(
    console_server, console_keys, signed_in, make_match
):
    league, _ = League.get_or_create(name="mlbc")
    Team.create(league=league, sr_id="sr:team:kc", alias="KC", market="Kansas City", name="Royals")
    kc = _tomorrow(make_match)
    other = make_match("nhlc", title="STL @ NSH", status="inprogress")
    MatchListenerRecord.create(match=other.id)
    rd = signed_in(console_keys["read"])
    for q in ("Royals", "kansas city", "HOU @", kc.sr_id):
        assert _row_ids(rd.client.get("/matches", params={"q": q}).text) == [str(kc.id)], q
    assert _row_ids(rd.client.get("/matches", params={"league": "nhlc"}).text) == [str(other.id)]
    assert _row_ids(rd.client.get("/matches", params={"badge": "-"}).text) == [str(kc.id)]
    assert _row_ids(rd.client.get("/matches", params={"status": "inprogress"}).text) == [str(other.id)]
    by_title = rd.client.get("/matches", params={"sort": "title", "dir": "desc"}).text
    assert _row_ids(by_title) == [str(other.id), str(kc.id)]
    assert 'aria-sort="descending"' in by_title


@pytest.mark.parametrize(
    "q", ['"HOU @ KC"', "50%", "%", "<script>alert(1)</script>", "x" * 2000, "' OR 1=1 --", "\\", "_"]
)
def test_a_search_with_quotes_percent_markup_or_2000_characters_is_answered_and_escaped(
    console_server, console_keys, signed_in, make_match, q
):
    _tomorrow(make_match)
    rd = signed_in(console_keys["read"])
    page = rd.client.get("/matches", params={"q": q})
    assert page.status_code == 200, page.text[:500]
    assert _row_ids(page.text) == []  # quotes, % and _ are part of the text searched for, not syntax
    assert "<script>alert(1)</script>" not in page.text
    assert f'value="{escape(q)}"' in page.text  # the search box keeps it, escaped


@pytest.mark.parametrize(
    ("params", "words"),
    [
        ({"from": "2030-02-30"}, "from must be a date like"),
        ({"to": "next week"}, "to must be a date like"),
        ({"league": "cricket"}, "no league named"),
        ({"status": "<b>odd</b>"}, "unknown match status"),
        ({"badge": "Sleeping"}, "unknown badge"),
        ({"sort": "colour"}, "unknown sort"),
        ({"per": "1000000"}, "per is one of"),
        ({"page": "abc"}, "page must be a whole number"),
        ({"page": "99"}, "page 99 is past the end"),
        ({"q": "x" * 2001}, "at most 2000 characters"),
    ],
)
def test_a_bad_parameter_is_a_readable_message_on_the_page_with_422(
    console_server, console_keys, signed_in, make_match, params, words
):
    _tomorrow(make_match)
    rd = signed_in(console_keys["read"])
    page = rd.client.get("/matches", params=params)
    assert page.status_code == 422, page.text[:500]
    [alert] = re.findall(r'<p class="error" role="alert" id="query-problem">(.*?)</p>', page.text)
    assert words in html.unescape(alert)
    assert "<b>odd</b>" not in page.text and 'action="/matches"' in page.text  # the form is still there
    if "past the end" in words:
        assert 'href="/matches?from=' in page.text and "Go to the first page" in page.text


def test_the_matches_stream_sends_the_page_rows_and_a_bad_query_is_422(
    console_server, console_keys, signed_in, make_match
):
    match = _tomorrow(make_match)
    op = signed_in(console_keys["operator"])
    with op.client.stream("GET", "/events/matches", params={"q": "HOU"}) as events:
        assert events.status_code == 200 and events.headers["content-type"].startswith("text/event-stream")
        seen = ""
        for line in events.iter_lines():
            seen += line + "\n"
            if f'data-match-id=\\"{match.id}\\"' in line:
                break
        assert "event: board" in seen and '"count": 1' in seen
    assert op.client.get("/events/matches", params={"from": "soon"}).status_code == 422


def test_bulk_on_ticked_rows_previews_exactly_them_with_titles_then_acts(
    console_server, console_keys, signed_in, make_match
):
    first = _tomorrow(make_match, "HOU @ KC")
    second = _tomorrow(make_match, "NYY @ BOS")
    untouched = _tomorrow(make_match, "SEA @ OAK")
    op = signed_in(console_keys["operator"])
    form = {"csrf_token": op.csrf, "action": "dispatch-off", "league": "", "reason": "rain"}
    ticked = {**form, "match_ids": [str(first.id), str(second.id)]}
    preview = op.client.post("/board/bulk", data=ticked)
    assert preview.status_code == 200, preview.text
    assert "2 matches fit the filter" in preview.text
    assert (
        ">HOU @ KC</a>" in preview.text
        and ">NYY @ BOS</a>" in preview.text
        and "SEA @ OAK" not in preview.text
    )
    confirm = CONFIRM_IN_PAGE.search(preview.text).group(1)
    done = op.client.post("/board/bulk/confirm", data={**ticked, "confirm": confirm})
    assert done.status_code == 200 and "2 done, 0 failed" in done.text
    assert ">HOU @ KC (mlbc)</a>" in done.text
    assert not Match.get_by_id(first.id).auto_dispatch_listener
    assert Match.get_by_id(untouched.id).auto_dispatch_listener
    nothing = op.client.post("/board/bulk", data=form)
    assert nothing.status_code == 422 and "needs a league or match ids" in nothing.text


def test_a_read_session_sees_the_matches_without_actions_or_boxes(
    console_server, console_keys, signed_in, make_match
):
    _tomorrow(make_match)
    page = signed_in(console_keys["read"]).client.get("/matches").text
    assert "HOU @ KC" in page
    for absent in ('name="match_ids"', 'action="/board/bulk"', "Force start", "Dispatch off"):
        assert absent not in page


def test_titles_stand_beside_ids_on_the_listener_board_the_card_and_the_audit_page(
    console_server, console_keys, signed_in, make_match
):
    match = make_match("mlbc", title="HOU @ KC", status="inprogress")
    MatchListenerRecord.create(match=match.id)
    op = signed_in(console_keys["operator"])
    board = op.client.get("/").text
    assert ">HOU @ KC</a>" in board and match.sr_id in board
    card = op.client.get(f"/matches/{match.id}").text
    assert "<h1>HOU @ KC" in card and "mlbc" in card and "Stop HOU @ KC (mlbc)?" in card
    op.client.post(
        f"/matches/{match.id}/auto-dispatch", data={"csrf_token": op.csrf, "on": "0", "reason": "r"}
    )
    audit = op.client.get("/audit").text
    assert f'<a href="/matches/{match.id}">HOU @ KC (mlbc)</a>' in audit


def test_the_history_page_has_a_chart_and_its_numbers_for_every_series(
    console_server, console_keys, signed_in
):
    rd = signed_in(console_keys["read"])
    page = rd.client.get("/history", params={"range": "24h"})
    assert page.status_code == 200, page.text
    for name in SERIES:
        assert f'data-chart="/history/data/{name}?range=24h"' in page.text, name
    assert page.text.count('role="img"') == len(SERIES) and page.text.count('class="chart-numbers"') == len(
        SERIES
    )
    assert '<script src="/static/uPlot.iife.min.js" defer></script>' in page.text
    bad = rd.client.get("/history", params={"range": "2y"})
    assert bad.status_code == 422 and "range is one of 1h, 24h, 7d" in bad.text
    data = rd.client.get("/history/data/events", params={"range": "7d"})
    assert data.status_code == 200 and data.json()["step_seconds"] == 1800
    unknown = rd.client.get("/history/data/nope")
    assert unknown.status_code == 422 and "no history series" in unknown.json()["error"]
    assert rd.client.get("/history/data/events", params={"top": "999"}).status_code == 422
    vendored = rd.client.get("/static/uPlot.iife.min.js")
    assert vendored.status_code == 200 and "uPlot" in vendored.text[:2000]
    assert "MIT License" in rd.client.get("/static/uPlot.LICENSE.txt").text
