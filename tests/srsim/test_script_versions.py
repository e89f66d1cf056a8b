"""srsim scripts: event versions (updated_at, atbat_id), corrections and deletes, round trips."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

import pytest

from srsim.script import GameScript, demo_games, load_script, save_script

pytestmark = pytest.mark.unit

SCHEDULED = datetime(2026, 6, 1, 18, 0, tzinfo=UTC)


def _game(**kw) -> GameScript:
    values = {"sr_id": str(uuid.uuid4()), "event_count": 24, "start_after": 5.0, "event_interval": 2.0}
    values.update(kw)
    return GameScript(**values)


def test_generated_events_carry_updated_at_and_pitches_their_at_bats_id():
    game = _game(game_delay_at_event=5)
    envelopes = game.envelopes(SCHEDULED)
    atbat_ids = set()
    for env in envelopes:
        event = env["payload"]["event"]
        assert event["updated_at"] == event["created_at"]
        if event["type"] == "atbat":
            atbat_ids.add(event["id"])
            current = event["id"]
        elif event["type"] == "pitch":
            assert event["atbat_id"] == current
    assert len(atbat_ids) == 6


def test_a_script_without_corrections_or_deletes_keeps_its_timeline_and_messages():
    game = _game(game_delay_at_event=8, delay_seconds=10)
    assert game.corrections == 0 and game.deletes == 0
    times = game.event_times()
    expected = [5.0 + i * 2.0 + (10 if i > 8 else 0) for i in range(25)]
    assert times == expected and game.total_events == 25
    envelopes = game.envelopes(SCHEDULED)
    assert len(envelopes) == 25
    assert {e["metadata"]["operation"] for e in envelopes} == {"create", "update"}
    assert not any(
        "description" in e["payload"]["event"] and e["payload"]["event"]["type"] == "pitch" for e in envelopes
    )


@pytest.mark.parametrize("delay", [None, 9])
def test_corrections_and_deletes_are_extra_messages_a_few_plays_after_their_pitch(delay):
    plain = _game(game_delay_at_event=delay, delay_seconds=10)
    game = _game(sr_id=plain.sr_id, game_delay_at_event=delay, delay_seconds=10, corrections=2, deletes=1)
    envelopes, times = game.envelopes(SCHEDULED), game.event_times()
    assert game.event_count == 24
    assert len(envelopes) == len(times) == game.total_events == plain.total_events + 3
    assert times == sorted(times)
    assert game.transitions() == plain.transitions()  # the game's clock is unchanged
    extras = [i for i, e in enumerate(envelopes) if _is_extra(e)]
    assert len(extras) == 3
    plays = [e for i, e in enumerate(envelopes) if i not in extras]
    assert plays == plain.envelopes(SCHEDULED)
    assert [t for i, t in enumerate(times) if i not in extras] == plain.event_times()
    assert envelopes[-1]["metadata"]["status"] == "complete" and not _is_extra(envelopes[-1])
    targets = []
    for i in extras:
        extra = envelopes[i]
        event_id = extra["payload"]["event"]["id"]
        [original_at] = [
            j for j, e in enumerate(envelopes) if e["payload"]["event"]["id"] == event_id and j != i
        ]
        original = envelopes[original_at]
        assert original_at < i <= original_at + 6  # a few plays later
        assert original["payload"]["event"]["type"] == "pitch"
        assert "atbatover" not in original["metadata"]["event_category"]
        targets.append(event_id)
        if extra["metadata"]["operation"] == "delete":
            assert set(extra["payload"]["event"]) == {"id", "type", "deleted"}
            assert extra["payload"]["event"]["deleted"] > original["payload"]["event"]["created_at"]
        else:
            event = extra["payload"]["event"]
            assert extra["metadata"]["operation"] == "update"
            assert extra["metadata"]["event_category"] != original["metadata"]["event_category"]
            assert event["description"] and event["updated_at"] > event["created_at"]
            unchanged = {k: v for k, v in event.items() if k not in ("updated_at", "description")}
            assert unchanged == {k: v for k, v in original["payload"]["event"].items() if k != "updated_at"}
        assert extra["metadata"]["status"] == "inprogress"
    assert len(set(targets)) == 3  # a deleted pitch is never a corrected one
    kinds = [envelopes[i]["metadata"]["operation"] for i in extras]
    assert sorted(kinds) == ["delete", "update", "update"]
    assert extras[0] < len(envelopes) / 3 and extras[-1] > len(envelopes) / 2  # spread over the game


def _is_extra(env: dict) -> bool:
    event = env["payload"]["event"]
    return env["metadata"]["operation"] == "delete" or ("description" in event and event["type"] == "pitch")


def test_more_corrections_than_pitches_are_capped_and_scripts_with_events_get_none():
    small = _game(event_count=6, corrections=10, deletes=10)
    assert small.total_events == len(small.envelopes(SCHEDULED)) == len(small.event_times()) == 6 + 2
    clone = GameScript.from_dict(
        {"sr_id": "c1", "corrections": 2, "deletes": 1, "events": [{"payload": {"event": {"id": "e"}}}]}
    )
    assert clone.total_events == len(clone.envelopes(SCHEDULED)) == 1


def test_corrections_and_deletes_round_trip_through_a_script_file(tmp_path):
    game = _game(corrections=3, deletes="2")
    game = GameScript.from_dict(game.to_dict())
    assert (game.corrections, game.deletes) == (3, 2)
    path = tmp_path / "s.json"
    save_script(path, [game])
    [loaded] = load_script(path)
    assert loaded.to_dict() == game.to_dict()
    assert loaded.envelopes(SCHEDULED) == game.envelopes(SCHEDULED)
    old = GameScript.from_dict({"sr_id": "old"})  # a script written before these fields
    assert (old.corrections, old.deletes) == (0, 0)


def test_the_demo_games_have_two_corrections_and_one_delete_each():
    for game in demo_games():
        assert (game.corrections, game.deletes) == (2, 1)
        ops = [e["metadata"]["operation"] for e in game.envelopes(SCHEDULED)]
        assert ops.count("delete") == 1
