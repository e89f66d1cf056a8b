"""GapTracker: how a run's gaps are opened, closed, counted and settled (pure logic, no service)."""

from __future__ import annotations

import logging

import pytest

from listener.gaps import GapCounts, GapTracker


@pytest.fixture
def gaps() -> GapTracker:
    return GapTracker("m1")


def test_a_new_run_has_no_gap(gaps: GapTracker) -> None:
    assert (gaps.open, gaps.pending, gaps.held_before) == (False, 0, None)
    assert gaps.counts == GapCounts()


def test_a_gap_is_open_until_the_stream_is_back_and_counts_its_seconds(gaps: GapTracker) -> None:
    gaps.begin("reconnect", since=100.0, held=7)
    assert gaps.open
    assert gaps.end(now=102.5, how="reconnected") == 2.5
    assert not gaps.open
    assert (gaps.counts.gaps, gaps.counts.gap_seconds, gaps.pending, gaps.held_before) == (1, 2.5, 1, 7)


def test_ending_with_no_gap_open_counts_nothing(gaps: GapTracker) -> None:
    assert gaps.end(now=5.0, how="reconnected") == 0.0
    assert gaps.counts.gaps == 0 and gaps.seq == 0


def test_a_second_begin_keeps_the_gap_already_open(gaps: GapTracker) -> None:
    gaps.begin("reconnect", since=10.0, held=3)
    gaps.begin("silence", since=20.0, held=9)
    assert gaps.end(now=30.0, how="reconnected") == 20.0
    assert gaps.held_before == 3


def test_a_clock_that_went_back_never_counts_negative_seconds(gaps: GapTracker) -> None:
    gaps.begin("reconnect", since=50.0, held=0)
    assert gaps.end(now=40.0, how="reconnected") == 0.0


def test_a_silence_is_one_closed_gap(gaps: GapTracker) -> None:
    assert gaps.silence(since=1.0, now=31.0, held=4) == 30.0
    assert (gaps.open, gaps.counts.gaps, gaps.pending) == (False, 1, 1)


def test_each_gap_is_one_warning_naming_the_match(gaps: GapTracker, caplog) -> None:
    caplog.set_level(logging.WARNING, logger="listener.gaps")
    gaps.begin("takeover", since=0.0, held=0)
    gaps.end(now=1.0, how="resumed")
    (line,) = [r.getMessage() for r in caplog.records]
    assert line == "match m1 gap: takeover, 1.0s without a stream, resumed"


def closed_gaps(gaps: GapTracker, *held: int) -> None:
    for n, h in enumerate(held):
        gaps.begin("reconnect", since=float(n), held=h)
        gaps.end(now=n + 0.5, how="reconnected")


def test_a_backfill_settles_every_gap_up_to_the_one_it_was_asked_for(gaps: GapTracker) -> None:
    closed_gaps(gaps, 10, 20, 30)
    gaps.recovered(5, upto=2)
    assert (gaps.pending, gaps.held_before, gaps.counts.events_backfilled) == (1, 30, 5)
    gaps.recovered(2)
    assert (gaps.pending, gaps.held_before, gaps.counts.events_backfilled) == (0, None, 7)


def test_gaps_a_backfill_gave_up_on_are_unrecovered_until_a_later_one_succeeds(gaps: GapTracker) -> None:
    closed_gaps(gaps, 1, 2)
    gaps.given_up()
    assert gaps.counts.gaps_unrecovered == 2
    gaps.recovered(3, upto=1)
    assert gaps.counts.gaps_unrecovered == 1
    gaps.recovered(0)
    assert gaps.counts.gaps_unrecovered == 0


def test_an_accepted_resume_settles_only_the_gap_just_closed(gaps: GapTracker) -> None:
    closed_gaps(gaps, 1, 2)
    gaps.given_up()
    gaps.resumed()
    assert (gaps.pending, gaps.held_before, gaps.counts.gaps_unrecovered) == (1, 1, 1)


def test_messages_a_replay_added_count_without_settling_gaps(gaps: GapTracker) -> None:
    closed_gaps(gaps, 1)
    gaps.added(4)
    assert (gaps.counts.events_backfilled, gaps.pending) == (4, 1)


def test_the_row_gets_gap_seconds_rounded_to_milliseconds() -> None:
    counts = GapCounts(gaps=2, gap_seconds=1.23456, events_backfilled=3)
    assert counts.as_row() == {
        "gaps": 2,
        "gap_seconds": 1.235,
        "events_backfilled": 3,
        "gaps_unrecovered": 0,
        "events_unrecovered": 0,
    }


def test_each_closed_gap_is_told_with_its_wall_times_for_the_cards_timeline() -> None:
    from datetime import datetime

    told: list[dict] = []
    gaps = GapTracker("m1", on_gap=told.append)
    gaps.begin("reconnect", since=10.0, held=0)
    gaps.end(now=12.5, how="reconnected")
    gaps.end(now=20.0, how="reconnected")  # no gap open: nothing told
    (gap,) = told
    began, ended = datetime.fromisoformat(gap["began"]), datetime.fromisoformat(gap["ended"])
    assert (ended - began).total_seconds() == pytest.approx(2.5)
    assert (gap["cause"], gap["seconds"], gap["how"], gap["number"]) == ("reconnect", 2.5, "reconnected", 1)


class _FullLog:
    """An archive whose every marker the full buffer drops (as EventLog: on_dropped closes a gap)."""

    count = 0
    last_written_at = None

    def __init__(self) -> None:
        self.markers: list[dict] = []
        self.recovery = None

    def append_marker(self, kind: str, **fields) -> None:
        self.markers.append({"marker": kind, **fields})
        self.recovery.overflowed(1)  # the marker was not kept: a gap of its own


def test_a_recovery_writes_a_gap_marker_and_a_dropped_marker_does_not_loop(tmp_path) -> None:
    import threading

    from config.settings import MatchListenerEnvironment
    from listener.recovery import Recovery

    log = _FullLog()
    settings = MatchListenerEnvironment(listener_backfill=False, data_dir=tmp_path)
    recovery = Recovery(
        settings,
        archive=log,
        league="mlb",
        sr_id="sr:match:1",
        match_id="m1",
        stop=threading.Event(),
        live_at_start=False,
    )
    log.recovery = recovery
    recovery.connected(resumed=False)
    recovery.dropped()
    recovery.connected(resumed=False)
    assert [m["marker"] for m in log.markers] == ["gap"]
    assert log.markers[0]["cause"] == "reconnect"
    assert recovery.counts.gaps == 2  # the reconnect and the dropped marker's own gap
