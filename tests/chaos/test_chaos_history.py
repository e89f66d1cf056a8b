"""The chaos run's checker (bench/_chaos_history.py) on synthetic histories: clean, then each violation."""

from __future__ import annotations

import dataclasses

from bench._chaos_history import (
    ArchiveResult,
    ArchiveSample,
    Connection,
    FaultRecord,
    History,
    RowState,
    check,
)

BOUND = 20.0


def _clean() -> History:
    """One match, 0 to 100 s: a kill at 30 s, a successor streaming at 38 s on another host."""
    return History(
        started=0.0,
        game_ends={"m1": 100.0},
        connections=[
            Connection("m1", "h0w0g0", 0, opened=-1.0, closed=30.0),
            Connection("m1", "h1w0g0", 1, opened=38.0, closed=100.5),
        ],
        rows=[
            RowState("r1", "m1", -2.0, 29.0, None, 1, None, seen_at=29.5),
            RowState("r1", "m1", -2.0, 29.0, 37.5, 1, 14, seen_at=37.6),
            RowState("r2", "m1", 37.8, 90.0, None, 2, None, seen_at=90.5),
            RowState("r2", "m1", 37.8, 100.6, 100.6, 2, 13, seen_at=101.0),
        ],
        archive_samples=[ArchiveSample("m1", 10.0, 1, 100), ArchiveSample("m1", 40.0, 2, 180)],
        archives=[ArchiveResult("m1", events=200)],
        faults=[FaultRecord("kill", started=30.0, healed=32.0, host=0)],
    )


def _kinds(history: History) -> list[str]:
    return [v["kind"] for v in check(history, bound_seconds=BOUND).violations]


def test_a_clean_history_passes_with_its_takeover_and_gap_figures():
    verdict = check(_clean(), bound_seconds=BOUND)
    assert verdict.ok, verdict.violations
    assert verdict.events_missing == 0
    assert verdict.max_unstreamed_seconds == 8.0
    assert verdict.max_takeover_seconds == 6.0  # from the supervisor's restart at 32 s to 38 s
    assert verdict.max_takeover_by_fault == {"kill": 6.0}


def test_two_connections_of_one_match_open_at_once_are_two_streams():
    history = _clean()
    history.connections[1] = dataclasses.replace(history.connections[1], opened=25.0)
    [violation] = check(history, bound_seconds=BOUND).violations
    assert violation["kind"] == "two-streams" and violation["seconds"] == 5.0
    assert violation["vias"] == ["h0w0g0", "h1w0g0"]


def test_a_frozen_workers_connection_does_not_count_as_a_stream_until_just_after_its_resume():
    history = _clean()
    history.connections[0] = dataclasses.replace(history.connections[0], closed=52.0)
    history.faults = [FaultRecord("pause", started=30.0, healed=50.0, host=0, frozen=("h0w0g0",))]
    assert check(history, bound_seconds=BOUND).ok  # closed 2 s after SIGCONT: within the grace
    history.connections[0] = dataclasses.replace(history.connections[0], closed=60.0)
    assert _kinds(history) == ["two-streams"]


def test_a_black_holed_feed_connection_does_not_count_as_a_stream():
    history = _clean()
    history.connections[0] = dataclasses.replace(history.connections[0], closed=45.0)
    history.faults = [FaultRecord("partition-feed", started=30.0, healed=44.0, host=0, feed_blackholed=True)]
    assert check(history, bound_seconds=BOUND).ok


def test_a_row_still_open_when_its_successor_starts_is_a_violation():
    history = _clean()
    history.rows = [r for r in history.rows if not (r.row_id == "r1" and r.ended_at is not None)]
    assert _kinds(history) == ["row-open-beside-successor"]


def test_a_row_closed_after_its_successor_started_is_a_violation():
    history = _clean()
    history.rows[1] = dataclasses.replace(history.rows[1], ended_at=40.0)
    assert _kinds(history) == ["row-open-beside-successor"]


def test_a_heartbeat_written_after_the_successor_started_is_a_violation():
    history = _clean()
    history.rows[1] = dataclasses.replace(history.rows[1], heartbeat_at=37.9)
    assert _kinds(history) == ["row-written-after-successor"]


def test_a_row_seen_closed_then_open_again_is_reopened():
    history = _clean()
    history.rows.append(RowState("r1", "m1", -2.0, 29.0, None, 1, None, seen_at=39.0))
    history.rows.append(RowState("r1", "m1", -2.0, 29.0, 37.5, 1, 14, seen_at=40.0))
    assert _kinds(history) == ["row-reopened"]


def test_a_fence_token_that_goes_down_or_names_no_run_is_a_violation():
    history = _clean()
    history.archive_samples.append(ArchiveSample("m1", 50.0, 1, 200))
    assert _kinds(history) == ["fence-token-decreased"]
    history = _clean()
    history.archive_samples.append(ArchiveSample("m1", 50.0, 7, 200))
    assert _kinds(history) == ["fence-token-unknown"]


def test_an_archive_missing_an_event_or_holding_one_twice_differs():
    history = _clean()
    history.archives = [ArchiveResult("m1", events=200, missing=["e7", "e8"])]
    verdict = check(history, bound_seconds=BOUND)
    assert [v["kind"] for v in verdict.violations] == ["archive-differs"]
    assert verdict.events_missing == 2 and verdict.violations[0]["first_missing"] == ["e7", "e8"]
    history.archives = [ArchiveResult("m1", events=200, duplicates=["k1"])]
    assert _kinds(history) == ["archive-differs"]


def test_a_takeover_slower_than_the_bound_after_its_faults_heal_is_slow_recovery():
    history = _clean()
    _slow_successor(history, 60.0)
    [violation] = check(history, bound_seconds=BOUND).violations
    assert violation["kind"] == "slow-recovery" and violation["seconds"] == 28.0


def _slow_successor(history: History, opened: float) -> None:
    history.connections[1] = dataclasses.replace(history.connections[1], opened=opened)
    history.rows[2:] = [dataclasses.replace(r, created_at=opened - 1.0) for r in history.rows[2:]]


def test_the_time_when_every_host_had_a_fault_on_does_not_count_against_the_takeover():
    history = _clean()
    _slow_successor(history, 60.0)
    # host 1 cut from 35 s to 50 s: with host 0's kill (and each one's settling after its heal),
    # no host could take the match over from 35 s to 44 s.
    history.faults.append(FaultRecord("partition-redis", started=35.0, healed=50.0, host=1))
    verdict = check(history, bound_seconds=BOUND)
    assert verdict.ok and verdict.max_takeover_seconds == 19.0 and verdict.max_unstreamed_seconds == 30.0
    assert verdict.max_takeover_by_fault == {"kill": 19.0}


def test_a_fault_on_a_host_neither_streaming_nor_cut_off_excuses_no_slow_takeover():
    history = _clean()
    history.hosts = 3
    _slow_successor(history, 60.0)
    history.faults += [
        FaultRecord("pause", started=40.0, healed=55.0, host=2, frozen=("h2w0g0",)),
        FaultRecord("deploy", started=57.0, healed=59.0, host=2),
    ]
    [violation] = check(history, bound_seconds=BOUND).violations
    assert violation["kind"] == "slow-recovery" and violation["cause"] == "kill"
    assert violation["seconds"] == 28.0 and violation["host"] == 0


def test_a_match_never_streaming_again_before_its_game_ends_is_not_recovered():
    history = _clean()
    history.connections = history.connections[:1]
    history.rows = history.rows[:2]
    history.archive_samples = history.archive_samples[:1]
    assert _kinds(history) == ["not-recovered"]


def test_a_second_fault_on_the_host_starting_before_the_first_healed_extends_the_cause():
    history = _clean()
    _slow_successor(history, 60.0)
    history.faults = [
        FaultRecord("partition-feed", started=30.0, healed=40.0, host=0, feed_blackholed=False),
        FaultRecord("partition-feed", started=38.0, healed=50.0, host=0, feed_blackholed=False),
    ]
    verdict = check(history, bound_seconds=BOUND)
    assert verdict.ok and verdict.max_takeover_seconds == 10.0, verdict  # from 50 s, not 40 s
    history.faults.append(FaultRecord("partition-redis", started=52.0, healed=58.0, host=0))
    assert check(history, bound_seconds=BOUND).max_takeover_seconds == 10.0  # started after the heal
