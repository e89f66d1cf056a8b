"""Issue 35 item 5 on the console against a real `kickoff serve`: a session of a key limited to leagues
sees only its leagues' listener board, on the page and on the board's live stream alike, and no other
page (each shows or acts on every league)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from api.keys import Scope, create_key
from models.listener_record import MatchListenerRecord
from tests.waiting import wait_for

pytestmark = pytest.mark.services


def _first_board_event(client, path: str = "/events/board") -> str:
    """The data of the stream's first ``board`` event (every row, rendered as on the page)."""
    with client.stream("GET", path, timeout=60) as stream:
        assert stream.status_code == 200, stream.read()
        lines: Iterator[str] = stream.iter_lines()
        wait_for(lambda: next(lines).startswith("event: board"), timeout=60, what="the first board event")
        data: list[str] = []
        for line in lines:
            if not line:
                break
            data.append(line)
        return "\n".join(data)


def test_a_league_limited_session_sees_only_its_leagues_board_on_the_page_and_the_live_stream(
    console_server, console_keys, signed_in, make_match
):
    mine, theirs = make_match("nfl", status="inprogress"), make_match("mlb", status="inprogress")
    for match in (mine, theirs):  # a run puts each on the board
        MatchListenerRecord.create(id=str(uuid.uuid4()), match=match.id)
    _, limited_key = create_key(name="nfl-reader", scope=Scope.OPERATOR, leagues=["NFL"])
    limited, everyone = signed_in(limited_key), signed_in(console_keys["read"])

    whole = _first_board_event(everyone.client)
    assert mine.sr_id in whole and theirs.sr_id in whole  # both are on the board

    page = limited.client.get("/")
    assert page.status_code == 200
    assert mine.sr_id in page.text and theirs.sr_id not in page.text
    assert '<option value="mlb"' not in page.text  # the league filter offers its leagues only
    streamed = _first_board_event(limited.client)
    assert mine.sr_id in streamed and theirs.sr_id not in streamed
    # a query naming the other league widens nothing
    asked = _first_board_event(limited.client, "/events/board?league=mlb")
    assert theirs.sr_id not in asked
    assert theirs.sr_id not in limited.client.get("/?league=mlb").text

    for path in (
        "/matches",
        f"/matches/{theirs.id}",
        f"/matches/{mine.id}",
        "/outbox",
        "/audit",
        "/events/matches",
    ):
        answer = limited.client.get(path, follow_redirects=False)
        assert answer.status_code == 403 and "limited to league(s) NFL" in answer.text, path
    acted = limited.client.post(
        f"/matches/{mine.id}/auto-dispatch",
        data={"on": "0", "csrf_token": limited.csrf},
        follow_redirects=False,
    )
    assert acted.status_code == 403  # the console acts on every league: a limited session acts on nothing
    assert limited.client.post("/sign-out", data={"csrf_token": limited.csrf}).status_code in (200, 303)
