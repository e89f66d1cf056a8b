"""The play-by-play's reading and the backfill it gives, on documents in memory (no feed, no service).

Fetching it from a feed, and a backfill closing a real gap, are tests/listener/test_gapless.py's.
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from listener.errors import PlayByPlayError
from listener.events import FROM_PLAY_BY_PLAY, EventIndex
from listener.play_by_play import PlayByPlay, backfill_messages, parse_play_by_play, play_by_play_url


def test_a_flat_document_gives_its_game_and_events_in_order() -> None:
    pbp = parse_play_by_play(
        {"game": {"id": "g1", "status": "inprogress"}, "events": [{"id": "a"}, {"id": "b"}]}
    )
    assert pbp == PlayByPlay(game={"id": "g1", "status": "inprogress"}, events=[{"id": "a"}, {"id": "b"}])


def test_nested_periods_are_read_in_document_order() -> None:
    body = {
        "game": {"id": "g1", "periods": [{"number": 1}]},
        "periods": [
            {"number": 1, "events": [{"id": "p1-a"}, {"id": "p1-b"}]},
            {"number": 2, "innings": [{"halfs": [{"events": [{"id": "p2-a"}]}]}]},
        ],
    }
    pbp = parse_play_by_play(body)
    assert [e["id"] for e in pbp.events] == ["p1-a", "p1-b", "p2-a"]
    assert pbp.game == {"id": "g1"}  # the game's lists (its periods) are left out


def test_a_wrapped_event_is_unwrapped_and_its_own_events_follow_it() -> None:
    body = {"events": [{"at_bat": {"id": "ab1", "events": [{"id": "pitch1"}, {"id": "pitch2"}]}}]}
    pbp = parse_play_by_play(body)
    assert [e["id"] for e in pbp.events] == ["ab1", "pitch1", "pitch2"]
    assert "events" not in pbp.events[0]


def test_an_event_listed_twice_is_kept_once() -> None:
    assert [e["id"] for e in parse_play_by_play({"events": [{"id": "a"}, {"id": "a"}]}).events] == ["a"]


def test_a_document_without_a_game_object_has_an_empty_game() -> None:
    assert parse_play_by_play({"game": "nope", "events": []}) == PlayByPlay(game={}, events=[])


@pytest.mark.parametrize(
    ("body", "says"),
    [
        ([], "not a JSON object (list)"),
        ({"events": ["x"]}, "event 0 is not an object"),
        ({"events": [{"id": "a"}, {"type": "pitch"}]}, "event 1 has no id"),
        ({"events": [{"id": ""}]}, "event 0 has no id"),
        ({"events": [{"id": 7}]}, "event 0 has no id"),
    ],
)
def test_a_document_that_is_not_a_play_by_play_is_refused_saying_why(body: Any, says: str) -> None:
    with pytest.raises(PlayByPlayError, match=re.escape(says)):
        parse_play_by_play(body)


def test_the_url_fills_league_access_and_game_in(settings) -> None:
    tuned = settings.model_copy(
        update={"sportradar_base_url": "http://feed.test/", "listener_sr_env": "trial"}
    )
    assert (
        play_by_play_url(tuned, league="MLB", sr_id="g1")
        == "http://feed.test/mlb/trial/v7/en/games/g1/pbp.json"
    )
    undeclared = play_by_play_url(tuned, league="XFL", sr_id="g1")
    assert undeclared == "http://feed.test/xfl/trial/games/g1/pbp.json"


def test_a_leagues_own_path_wins(settings) -> None:
    tuned = settings.model_copy(
        update={
            "sportradar_base_url": "http://feed.test",
            "listener_sr_env": "production",
            "listener_play_by_play_paths": {"nfl": "/nfl/official/{access}/v7/en/games/{sr_id}/pbp.json"},
        }
    )
    assert (
        play_by_play_url(tuned, league="nfl", sr_id="g2")
        == "http://feed.test/nfl/official/production/v7/en/games/g2/pbp.json"
    )
    mlb = play_by_play_url(tuned, league="mlb", sr_id="g2")
    assert mlb.endswith("/mlb/production/v7/en/games/g2/pbp.json")


def pitch(event_id: str) -> dict[str, Any]:
    return {"id": event_id, "type": "pitch"}


def live(event_id: str, *, updated_at: str | None = None, operation: str = "create") -> dict[str, Any]:
    event: dict[str, Any] = {"id": event_id, "type": "pitch"}
    if updated_at is not None:
        event["updated_at"] = updated_at
    return {"payload": {"game": {"id": "g1"}, "event": event}, "metadata": {"operation": operation}}


def archive(*messages: dict[str, Any]) -> EventIndex:
    index = EventIndex()
    for message in messages:
        index.add(message)
    return index


def backfill(events: list[dict[str, Any]], index: EventIndex, held_before: int = 0) -> list[dict[str, Any]]:
    return backfill_messages(
        PlayByPlay(game={}, events=events), index, sr_id="g1", league="mlb", held_before=held_before
    )


def test_an_event_the_archive_never_had_is_a_backfilled_create() -> None:
    (message,) = backfill([{"id": "a", "type": "pitch", "event_category": "play"}], archive())
    assert message["metadata"] == {
        "league": "MLB",
        "match": "sd:match:g1",
        "event_type": "pitch",
        "operation": "create",
        "event_category": "play",
    }
    assert message["payload"] == {"game": {"id": "g1"}, "event": {"id": "a", "type": "pitch"}}
    assert message["kickoff"]["backfilled"] == FROM_PLAY_BY_PLAY


def test_an_event_held_in_the_same_or_a_newer_version_is_left_out() -> None:
    index = archive(live("a", updated_at="2024-01-01T00:00:05Z"))
    assert backfill([{"id": "a", "updated_at": "2024-01-01T00:00:05Z"}], index) == []
    assert backfill([{"id": "a", "updated_at": "2024-01-01T00:00:01Z"}], index) == []
    assert backfill([{"id": "a"}], index) == []  # no stamp against a stamped version: the archive's stands


def test_a_newer_version_is_a_backfilled_update() -> None:
    index = archive(live("a", updated_at="2024-01-01T00:00:05Z"))
    (message,) = backfill([{"id": "a", "updated_at": "2024-01-01T00:00:09Z"}], index)
    assert message["metadata"]["operation"] == "update"


def test_an_event_the_stream_deleted_is_not_brought_back() -> None:
    index = archive(live("a"), live("a", operation="delete"))
    assert backfill([pitch("a")], index) == []


def test_an_event_gone_from_a_play_by_play_past_it_becomes_a_delete() -> None:
    index = archive(live("a"), live("b"), live("c"))
    out = backfill([pitch("b"), pitch("c")], index, held_before=2)
    assert [(m["metadata"]["operation"], m["payload"]["event"]["id"]) for m in out] == [("delete", "a")]


def test_a_play_by_play_lagging_behind_deletes_nothing() -> None:
    index = archive(live("a"), live("b"), live("c"))
    assert backfill([pitch("a")], index, held_before=3) == []
