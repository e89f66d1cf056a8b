"""Message identity, each event's current state, play-by-play reading and backfill merging (no services)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from listener.archive import EventArchive, read_events
from listener.backfill import merge
from listener.errors import PlayByPlayError
from listener.events import (
    FROM_PLAY_BY_PLAY,
    EventIndex,
    backfilled_from,
    current_events,
    message_key,
)
from listener.gaps import GapTracker
from listener.play_by_play import PlayByPlay, backfill_messages, parse_play_by_play
from listener.verify import compare

pytestmark = pytest.mark.unit

GAME = "g-1"


def msg(event_id: str, *, category: str = "pitch", updated: str | None = None, op: str = "update", **extra):
    event = {"id": event_id, "type": "pitch", **extra}
    if updated is not None:
        event["updated_at"] = updated
    return {
        "payload": {"game": {"id": GAME, "status": "inprogress"}, "event": event},
        "metadata": {"match": f"sd:match:{GAME}", "event_category": category, "operation": op},
    }


def test_a_copy_is_the_same_message_whatever_the_delivery_adds():
    live = msg("e1", updated="2024-05-21T18:03:10+00:00")
    replayed = {**json.loads(json.dumps(live)), "resume_id": "tok.7", "replay": True}
    backfilled = {**json.loads(json.dumps(live)), "kickoff": {"backfilled": FROM_PLAY_BY_PLAY}}
    assert message_key(live) == message_key(replayed) == message_key(backfilled)
    # without an event id the whole message is the identity, less what the delivery adds
    bare = {"payload": {"note": "no id"}, "resume_id": "tok.8"}
    resent = {**bare, "resume_id": "tok.9", "replay": True, "srsim_sent_at": 1733529600.25}
    assert message_key(bare) == message_key(resent) != message_key({"payload": {"note": "other"}})
    assert backfilled_from(backfilled) == FROM_PLAY_BY_PLAY and backfilled_from(live) is None


def test_a_corrected_category_without_a_timestamp_is_a_new_version():
    first, corrected = msg("e1", category="pitch,ball"), msg("e1", category="pitch,strike")
    assert message_key(first) != message_key(corrected)
    assert message_key(first) == message_key(msg("e1", category="pitch,ball"))


def test_markers_are_never_taken_for_a_copy():
    marker = {"kickoff": {"marker": "delay", "at": "x"}}
    assert message_key(marker) is None
    index = EventIndex()
    assert index.add(marker) and index.add(marker)


def test_current_state_applies_updates_by_version_and_removes_deletes():
    stream = [
        msg("a", updated="2024-01-01T00:00:01Z", op="create"),
        msg("b", updated="2024-01-01T00:00:02Z", category="pitch,ball"),
        msg("x", updated="2024-01-01T00:00:02Z") | {"metadata": {"match": "sd:match:other"}},
        msg("b", updated="2024-01-01T00:00:09Z", category="pitch,strike"),
        msg("b", updated="2024-01-01T00:00:05Z", category="pitch,foul"),  # older, arrives late
        msg("c", updated="2024-01-01T00:00:03Z"),
        {
            "payload": {"event": {"id": "c", "deleted": "2024-01-01T00:00:10Z"}},
            "metadata": {"operation": "delete"},
        },
    ]
    current = current_events(stream)
    assert list(current) == ["a", "b", "x"]
    assert current["b"]["metadata"]["event_category"] == "pitch,strike"


def test_the_archive_records_each_distinct_message_once_also_after_reopening(tmp_path: Path):
    path = tmp_path / "m.json"
    archive = EventArchive(path).open()
    one, two = msg("e1", updated="t1"), msg("e2", updated="t2")
    assert archive.record(one) and archive.record(two)
    assert not archive.record(json.loads(json.dumps(one)) | {"resume_id": "r.1"})
    archive.close()
    again = EventArchive(path).open()
    assert not again.record(two)
    assert again.record(msg("e2", updated="t3"))
    again.close()
    assert [m["payload"]["event"].get("updated_at") for m in read_events(path)] == ["t1", "t2", "t3"]


def test_a_nested_play_by_play_is_read_in_document_order():
    doc = {
        "game": {"id": GAME, "status": "closed", "innings": [{"number": 1}]},
        "innings": [
            {"halfs": [{"events": [{"at_bat": {"id": "ab1", "events": [{"id": "p1"}, {"id": "p2"}]}}]}]},
            {"halfs": [{"events": [{"id": "p3"}]}]},
        ],
    }
    pbp = parse_play_by_play(doc)
    assert [e["id"] for e in pbp.events] == ["ab1", "p1", "p2", "p3"]
    assert pbp.game == {"id": GAME, "status": "closed"}


@pytest.mark.parametrize(
    "doc",
    [[], "text", {"events": [{"type": "pitch"}]}, {"events": ["x"]}],
    ids=["list", "str", "noid", "notobj"],
)
def test_a_play_by_play_that_is_not_one_is_refused(doc):
    with pytest.raises(PlayByPlayError):
        parse_play_by_play(doc)


def pbp_of(*events: dict) -> PlayByPlay:
    return PlayByPlay(game={"id": GAME}, events=[dict(e) for e in events])


def test_backfill_adds_what_is_missing_and_newer_versions_then_verify_agrees(tmp_path: Path):
    archive = EventArchive(tmp_path / "m.json").open()
    archive.record(msg("a", updated="t1", op="create"))
    archive.record(msg("gone", updated="t1"))
    archive.record(msg("b", updated="t1", category="pitch,ball"))
    held = archive.count
    final = pbp_of(
        {"id": "a", "type": "pitch", "updated_at": "t1", "event_category": "pitch"},
        {"id": "b", "type": "pitch", "updated_at": "t5", "event_category": "pitch,strike"},
        {"id": "c", "type": "pitch", "updated_at": "t6", "event_category": "pitch,hit,atbatover"},
    )
    before = compare(read_events_of(archive), final)
    assert (before.missing, before.extra, before.differing) == (["c"], ["gone"], ["b"])
    # "gone" is not listed although "b", recorded after it, is: the play-by-play is past it.
    seen = []
    recorded = merge(final, archive, sr_id=GAME, league="mlb", held_before=held, handle=seen.append)
    assert recorded == 3 == len(seen)  # b's new version, c, the delete of "gone"
    assert all(backfilled_from(m) == FROM_PLAY_BY_PLAY for m in seen)
    assert merge(final, archive, sr_id=GAME, league="mlb", held_before=held) == 0  # nothing twice
    archive.close()
    after = compare(read_events(archive.path), final)
    assert after.ok, after
    assert (
        current_events(read_events(archive.path))["c"]["metadata"]["event_category"] == "pitch,hit,atbatover"
    )


def read_events_of(archive: EventArchive) -> list:
    archive.flush()
    return read_events(archive.path)


def test_backfill_never_puts_back_an_older_version_nor_deletes_what_came_after_the_gap(tmp_path: Path):
    index = EventIndex()
    index.add(msg("a", updated="t9"))
    held = index.messages
    index.add(msg("live-after-gap", updated="t10"))
    out = backfill_messages(
        pbp_of({"id": "a", "type": "pitch", "updated_at": "t3"}),
        index,
        sr_id=GAME,
        league="mlb",
        held_before=held,
    )
    assert out == []


def test_gap_tracker_counts_each_gap_once_and_settles_them():
    gaps = GapTracker("m-1")
    gaps.begin("reconnect", since=10.0, held=5)
    gaps.begin("reconnect", since=11.0, held=6)  # still the same gap
    assert gaps.end(now=12.5, how="reconnected") == pytest.approx(2.5)
    gaps.silence(since=20.0, now=31.0, held=9)
    assert (gaps.counts.gaps, gaps.pending, gaps.held_before) == (2, 2, 5)
    gaps.given_up()
    assert gaps.counts.gaps_unrecovered == 2
    gaps.recovered(7)
    assert (gaps.counts.gaps_unrecovered, gaps.counts.events_backfilled, gaps.pending) == (0, 7, 0)
    assert gaps.counts.as_row()["gap_seconds"] == pytest.approx(13.5)


def test_a_play_by_play_lagging_behind_the_push_deletes_nothing_and_later_recovers_nothing_twice():
    index = EventIndex()
    for n in range(5):
        index.add(msg(f"e{n}", updated=f"t{n}"))
    lagging = pbp_of(*({"id": f"e{n}", "type": "pitch", "updated_at": f"t{n}"} for n in range(3)))
    assert backfill_messages(lagging, index, sr_id=GAME, league="mlb", held_before=index.messages) == []


def test_a_play_by_play_without_timestamps_never_overrides_a_stamped_version_nor_a_live_delete():
    index = EventIndex()
    index.add(msg("a", updated="t1", category="pitch,ball"))
    index.add(msg("b", updated="t1"))
    index.add({"payload": {"event": {"id": "b", "deleted": "t2"}}, "metadata": {"operation": "delete"}})
    stale = pbp_of(
        {"id": "a", "type": "pitch", "event_category": "pitch,strike"},  # no updated_at: cannot be ordered
        {"id": "b", "type": "pitch", "updated_at": "t1"},  # fetched before the live delete
    )
    assert backfill_messages(stale, index, sr_id=GAME, league="mlb", held_before=index.messages) == []
    # The comparison does not call an event differing only because one side has no timestamp.
    same = pbp_of({"id": "a", "type": "pitch", "event_category": "pitch,ball"})
    assert compare([msg("a", updated="t1", category="pitch,ball")], same).ok
