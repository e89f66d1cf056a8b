"""The chaos run's checker (harness/chaos/checker.py) on synthetic histories: clean, each violation,
each kind of fault's unable time, and each blind spot issue 36 found in the checker before."""

from __future__ import annotations

import dataclasses

import pytest

from harness.chaos.checker import (
    ArchiveResult,
    ArchiveSample,
    Connection,
    FaultRecord,
    History,
    RowState,
    check,
    excused,
    injected_counts,
    live_spans,
    unable_spans,
)
from harness.chaos.schedule import FAULT_KINDS

BOUND = 20.0
#: Three hosts with two worker slots each.
SLOTS = {f"h{h}w{s}": h for h in range(3) for s in range(2)}


def _conn(via: str, opened: float, closed: float | None, *, port: int | None = None) -> Connection:
    """A connection of match m1 with live data from its open to its close."""
    host = int(via[1])
    last = closed if closed is not None else 100.0
    return Connection("m1", via, host, opened, closed, first_live=opened, last_live=last, port=port)


def _clean() -> History:
    """One match, 0 to 100 s: a kill at 30 s (restarted worker ready at 33 s), a successor on
    another host streaming at 38 s."""
    return History(
        started=0.0,
        game_ends={"m1": 100.0},
        connections=[_conn("h0w0g0", -1.0, 30.0), _conn("h1w0g0", 38.0, 100.5)],
        rows=[
            RowState("r1", "m1", -2.0, 29.0, None, 1, None, seen_at=29.5),
            RowState("r1", "m1", -2.0, 29.0, 37.5, 1, 14, seen_at=37.6),
            RowState("r2", "m1", 37.8, 90.0, None, 2, None, seen_at=90.5),
            RowState("r2", "m1", 37.8, 100.6, 100.6, 2, 13, seen_at=101.0),
        ],
        archive_samples=[ArchiveSample("m1", 10.0, 1, 100), ArchiveSample("m1", 40.0, 2, 180)],
        archives=[ArchiveResult("m1", events=200)],
        faults=[FaultRecord("kill", 30.0, 33.0, 0, ("h0w0",), down=(("h0w0", 30.0, 33.0),))],
        workers=dict(SLOTS),
        polls=[float(t) / 2 for t in range(0, 203)],
    )


def _kinds(history: History) -> list[str]:
    return [v["kind"] for v in check(history, bound_seconds=BOUND).violations]


def test_a_clean_history_passes_with_its_takeover_measured_from_the_kill():
    verdict = check(_clean(), bound_seconds=BOUND)
    assert verdict.ok, verdict.violations
    assert verdict.events_missing == 0
    assert verdict.max_unstreamed_seconds == 8.0
    assert verdict.max_takeover_seconds == 8.0  # from the kill at 30 s, not the restart at 33 s
    assert verdict.max_takeover_by_fault == {"kill": 8.0}


def test_two_connections_of_one_match_live_at_once_are_two_streams():
    history = _clean()
    history.connections[1] = dataclasses.replace(history.connections[1], opened=25.0, first_live=25.0)
    [violation] = check(history, bound_seconds=BOUND).violations
    assert violation["kind"] == "two-streams" and violation["seconds"] == 5.0
    assert violation["vias"] == ["h0w0g0", "h1w0g0"]


@pytest.mark.parametrize("kind", ["deploy", "clock-skew"])
def test_a_graceful_stops_hand_off_overlap_is_by_design_but_not_past_its_bound(kind):
    """The old stream stays open, unrecorded, until its successor's first live byte (issue 37)."""
    history = _clean()
    history.faults = [FaultRecord(kind, 28.0, 40.0, 0, ("h0w0",), down=(("h0w0", 28.0, 40.0),))]
    history.connections[1] = dataclasses.replace(history.connections[1], opened=29.0, first_live=29.0)
    assert _kinds(history) == []  # 29 to 30 s: within the hand-off's overlap
    history.connections[0] = dataclasses.replace(history.connections[0], closed=34.0, last_live=34.0)
    [violation] = check(history, bound_seconds=BOUND).violations
    assert violation["kind"] == "two-streams" and violation["seconds"] == pytest.approx(2.0)  # past 32 s


def test_an_overlap_beside_a_kill_or_before_the_sigterm_is_no_hand_off():
    history = _clean()  # a kill at 30 s
    history.connections[1] = dataclasses.replace(history.connections[1], opened=29.0, first_live=29.0)
    assert _kinds(history) == ["two-streams"]
    history.faults = [FaultRecord("deploy", 29.5, 40.0, 0, ("h0w0",), down=(("h0w0", 29.5, 40.0),))]
    assert _kinds(history) == ["two-streams"]  # live at 29 s, before the deploy's SIGTERM


def test_a_frozen_workers_connection_does_not_count_as_a_stream_until_just_after_its_resume():
    history = _clean()
    history.connections[0] = dataclasses.replace(history.connections[0], closed=52.0, last_live=52.0)
    history.faults = [FaultRecord("pause", 30.0, 50.0, 0, ("h0w0",), frozen=("h0w0g0",))]
    assert _kinds(history) == []  # closed 2 s after SIGCONT: within the grace
    history.connections[0] = dataclasses.replace(history.connections[0], closed=60.0, last_live=60.0)
    assert _kinds(history) == ["two-streams"]


def test_a_black_holed_feed_connection_does_not_count_as_a_stream():
    history = _clean()
    history.connections[0] = dataclasses.replace(history.connections[0], closed=45.0, last_live=45.0)
    history.faults = [FaultRecord("partition-feed", 30.0, 44.0, 0, feed_blackholed=True)]
    assert check(history, bound_seconds=BOUND).ok


def test_a_connection_counts_only_while_srsim_sent_live_data_on_it():
    history = _clean()
    history.connections[1] = dataclasses.replace(history.connections[1], first_live=None, last_live=None)
    assert _kinds(history) == ["not-recovered"]  # open from 38 s, but nothing live was ever sent
    history = _clean()
    history.connections[1] = dataclasses.replace(history.connections[1], first_live=70.0)
    [violation] = check(history, bound_seconds=BOUND).violations  # a replay until 70 s
    assert violation["kind"] == "slow-recovery" and violation["seconds"] == 40.0


def test_a_row_still_open_when_its_successor_starts_is_a_violation():
    history = _clean()
    history.rows = [r for r in history.rows if not (r.row_id == "r1" and r.ended_at is not None)]
    assert _kinds(history) == ["row-open-beside-successor"]


def test_a_row_closed_after_its_successor_started_is_a_violation():
    history = _clean()
    history.rows[1] = dataclasses.replace(history.rows[1], ended_at=40.0, seen_at=40.5)
    assert _kinds(history) == ["row-open-beside-successor"]


def test_a_heartbeat_written_after_the_successor_started_is_a_violation():
    history = _clean()
    history.rows[1] = dataclasses.replace(history.rows[1], heartbeat_at=37.9)
    assert _kinds(history) == ["row-written-after-successor"]


def test_a_row_seen_closed_then_open_again_is_reopened():
    history = _clean()
    history.rows.append(RowState("r1", "m1", -2.0, 29.0, None, 1, None, seen_at=39.0))
    history.rows.append(RowState("r1", "m1", -2.0, 29.0, 37.5, 1, 14, seen_at=40.0))
    assert "row-reopened" in _kinds(history)


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


def _slow_successor(history: History, opened: float) -> None:
    history.connections[1] = dataclasses.replace(history.connections[1], opened=opened, first_live=opened)
    history.rows[2:] = [dataclasses.replace(r, created_at=opened - 1.0) for r in history.rows[2:]]


def test_a_takeover_slower_than_the_bound_from_the_streams_loss_is_slow_recovery():
    history = _clean()
    _slow_successor(history, 55.0)
    [violation] = check(history, bound_seconds=BOUND).violations
    assert violation["kind"] == "slow-recovery" and violation["seconds"] == 25.0
    assert violation["cause"] == "kill"


def test_a_match_never_streaming_again_before_its_game_ends_is_not_recovered():
    history = _clean()
    history.connections = history.connections[:1]
    history.rows = history.rows[:2]
    history.archive_samples = history.archive_samples[:1]
    assert _kinds(history) == ["not-recovered"]


# -- the time excused: only when no worker slot at all could stream ------------------------------


@pytest.mark.parametrize(
    ("fault", "unable"),
    [
        (
            FaultRecord("kill", 10.0, 14.0, 0, ("h0w1",), down=(("h0w1", 10.0, 14.0),)),
            {"h0w1": [(10.0, 14.0)]},
        ),
        (FaultRecord("pause", 10.0, 25.0, 1, ("h1w0",), frozen=("h1w0g2",)), {"h1w0": [(10.0, 25.0)]}),
        (FaultRecord("partition-redis", 10.0, 20.0, 2), {"h2w0": [(10.0, 20.0)], "h2w1": [(10.0, 20.0)]}),
        (FaultRecord("partition-postgres", 10.0, 20.0, 2), {"h2w0": [(10.0, 20.0)], "h2w1": [(10.0, 20.0)]}),
        (
            FaultRecord("partition-feed", 10.0, 20.0, 0, feed_blackholed=True),
            {"h0w0": [(10.0, 20.0)], "h0w1": [(10.0, 20.0)]},
        ),
        (FaultRecord("partition-all", 10.0, 20.0, 1), {"h1w0": [(10.0, 20.0)], "h1w1": [(10.0, 20.0)]}),
        (FaultRecord("redis-restart", 10.0, 12.0), {slot: [(10.0, 12.0)] for slot in SLOTS}),
        (
            FaultRecord(
                "clock-skew", 10.0, 60.0, 0, ("h0w0",), down=(("h0w0", 10.0, 13.0), ("h0w0", 55.0, 60.0))
            ),
            {"h0w0": [(10.0, 13.0), (55.0, 60.0)]},  # streaming with its skewed clock in between
        ),
        (
            FaultRecord(
                "deploy", 10.0, 19.0, 1, ("h1w0", "h1w1"), down=(("h1w0", 10.0, 16.0), ("h1w1", 10.5, 19.0))
            ),
            {"h1w0": [(10.0, 16.0)], "h1w1": [(10.5, 19.0)]},
        ),
        (
            FaultRecord("exited", 10.0, 15.0, 2, ("h2w1",), down=(("h2w1", 10.0, 15.0),)),
            {"h2w1": [(10.0, 15.0)]},
        ),
        (FaultRecord("pause", 10.0, 10.0, 1, ("h1w0",), injected=False), {}),
        (FaultRecord("kill", 10.0, 10.0, 0, ("h0w1",), injected=False), {}),
    ],
    ids=lambda value: (
        value.kind + ("" if value.injected else "-not-injected") if isinstance(value, FaultRecord) else ""
    ),
)
def test_each_kind_of_fault_leaves_exactly_its_workers_unable_to_stream(fault, unable):
    assert unable_spans(fault, SLOTS) == unable


def test_the_table_covers_every_kind_of_fault_the_schedule_makes():
    for kind in FAULT_KINDS:
        fault = FaultRecord(kind, 1.0, 2.0, None if kind == "redis-restart" else 0, ("h0w0",))
        unable_spans(fault, SLOTS)  # no kind unknown to the checker


def test_only_the_time_when_every_worker_was_unable_is_excused():
    history = _clean()
    history.faults = [
        FaultRecord("partition-all", 30.0, 50.0, 0),
        FaultRecord("partition-all", 35.0, 45.0, 1),
        FaultRecord("partition-redis", 40.0, 48.0, 2),
        FaultRecord("redis-restart", 60.0, 62.0),
    ]
    assert excused(history) == [(40.0, 45.0), (60.0, 62.0)]
    _slow_successor(history, 55.0)
    verdict = check(history, bound_seconds=BOUND)
    assert verdict.ok and verdict.max_takeover_seconds == 20.0  # 25 s without a stream, 5 s excused


# -- the blind spots of issue 36, each fed to the checker -----------------------------------------


def test_a_pause_after_which_no_worker_took_over_counts_from_the_pause_not_from_its_heal():
    history = _clean()
    # The streaming worker paused from 30 s to 55 s, then streamed on: nobody took over.
    history.connections = [_conn("h0w0g0", -1.0, 100.5)]
    history.rows = [*history.rows[:1], RowState("r1", "m1", -2.0, 100.6, 100.6, 1, 13, seen_at=101.0)]
    history.archive_samples = history.archive_samples[:1]
    history.faults = [FaultRecord("pause", 30.0, 55.0, 0, ("h0w0",), frozen=("h0w0g0",))]
    [violation] = check(history, bound_seconds=BOUND).violations
    assert violation["kind"] == "slow-recovery" and violation["cause"] == "pause"
    assert violation["seconds"] == 27.0  # 30 s to 57 s (the resumed stream counts after its grace)


def test_a_gap_is_not_excused_by_a_fault_of_another_worker_while_a_third_could_stream():
    history = _clean()
    _slow_successor(history, 55.0)
    history.faults += [
        FaultRecord("partition-redis", 31.0, 50.0, 1),  # host 1 cut; host 2 could take the match
        FaultRecord("pause", 40.0, 55.0, 2, ("h2w0",), frozen=("h2w0g0",)),  # h2w1 still could
    ]
    [violation] = check(history, bound_seconds=BOUND).violations
    assert violation["kind"] == "slow-recovery" and violation["seconds"] == 25.0


def test_a_connection_given_up_inside_a_black_hole_never_streams_again_after_the_heal():
    history = _clean()
    # Host 0's feed black-holed 30-44 s; its worker closed the connection inside it. srsim still
    # believes it open (and sends into it) to the end; no one took the match over.
    history.connections = [_conn("h0w0g0", -1.0, None, port=40123)]
    history.rows = history.rows[:1]
    history.archive_samples = history.archive_samples[:1]
    fault = FaultRecord("partition-feed", 30.0, 44.0, 0, feed_blackholed=True, gave_up=(40123,))
    history.faults = [fault]
    assert live_spans(history.connections[0], history) == [(-1.0, 30.0)]
    assert _kinds(history) == ["not-recovered"]
    history.faults = [dataclasses.replace(fault, gave_up=())]  # kept: it streams after the heal's grace
    assert live_spans(history.connections[0], history) == [(-1.0, 30.0), (60.0, 100.0)]


def test_a_connection_opened_after_a_black_hole_healed_streams_from_its_first_live_byte():
    """docs/reliability.md finding 12 (seed 7): h0w1 paused at 88 s; h2w0 took its matches over on a
    connection opened at 95.9 s, after host 2's feed black hole (64.6-94.2 s) healed. That black
    hole's grace (srsim's bytes queued during it) was applied to every connection of host 2, so the
    new one counted only from 125.7 s: 37.7 s "without a stream" for an 8 s takeover."""
    history = _clean()
    history.connections = [
        Connection("m1", "h0w1g1", 0, -1.0, 55.9, first_live=-1.0, last_live=55.7),
        Connection("m1", "h2w0g3", 2, 47.9, 100.5, first_live=48.2, last_live=100.0),
    ]
    history.faults = [
        FaultRecord("partition-feed", 16.6, 46.2, 2, feed_blackholed=True),
        FaultRecord("pause", 40.0, 55.9, 0, ("h0w1",), frozen=("h0w1g1",)),
    ]
    verdict = check(history, bound_seconds=BOUND)
    assert verdict.ok, verdict.violations
    assert verdict.max_takeover_seconds == 8.2  # the pause at 40 s to h2w0's first live byte
    # A connection open through the black hole still waits for the grace after the heal.
    history.connections[1] = dataclasses.replace(history.connections[1], opened=10.0, first_live=10.0)
    [before, after] = live_spans(history.connections[1], history)
    assert before == (10.0, 16.6) and after == (pytest.approx(77.8), 100.0)  # 46.2 + 29.6 + 2


def test_a_connection_opened_after_a_black_holes_heal_streams_from_its_first_live_byte():
    history = _clean()
    # Host 1's feed black-holed 5-36 s: its old connections' queued bytes may cross until 68 s (the
    # heal's grace), but the successor's connection opened at 38 s is new (seed 7's run: 29.6 s of
    # a takeover's live data read as none, three matches 37.7 s "without a stream" after a pause).
    history.faults.append(FaultRecord("partition-feed", 5.0, 36.0, 1, feed_blackholed=True))
    assert live_spans(history.connections[1], history) == [(38.0, 100.5)]
    assert _kinds(history) == []
    # A connection open in the black hole waits for the grace.
    history.connections[1] = _conn("h1w0g0", 4.0, 100.5)
    assert live_spans(history.connections[1], history) == [(4.0, 5.0), (68.0, 100.5)]


def test_a_later_connection_from_a_port_given_up_in_an_earlier_black_hole_streams():
    history = _clean()
    # Host 1's feed black-holed 5-27 s gave up port 41942; at 38 s host 1's proxy reuses that port
    # for the successor's stream (seed 13's run: 122 s of srsim's live data on it read as none).
    history.connections[1] = _conn("h1w0g0", 38.0, 100.5, port=41942)
    history.faults.append(FaultRecord("partition-feed", 5.0, 27.0, 1, feed_blackholed=True, gave_up=(41942,)))
    assert live_spans(history.connections[1], history) == [(38.0, 100.5)]
    assert _kinds(history) == []
    # The connection that was open in the black hole is still the one given up.
    history.connections[1] = _conn("h1w0g0", 4.0, 100.5, port=41942)
    assert live_spans(history.connections[1], history) == [(4.0, 5.0)]


def test_a_row_seen_open_at_a_poll_where_its_successor_existed_is_a_violation_even_if_closed_later():
    history = _clean()
    # The poll at 38 s saw r2 (created 37.8 s) beside r1 still open; r1's close (dated 37.5 s) was
    # seen only at 38.5 s: its last state alone looks fine.
    history.rows[1] = dataclasses.replace(history.rows[1], seen_at=38.5)
    history.rows.insert(1, RowState("r2", "m1", 37.8, None, None, 2, None, seen_at=38.0))
    [violation] = check(history, bound_seconds=BOUND).violations
    assert violation["kind"] == "row-open-beside-successor" and violation["seen_at"] == 38.0


def test_a_recorder_that_recorded_no_row_or_lost_polls_fails_the_run():
    history = _clean()
    history.rows = []
    history.archive_samples = []
    assert "recorder-empty" in _kinds(history)
    history = _clean()
    history.lost_polls = 4
    assert _kinds(history) == ["recorder-lost-polls"]
    history = _clean()
    history.polls = [p for p in history.polls if not 40.0 < p < 52.0]  # a 12 s hole
    assert _kinds(history) == ["recorder-lost-polls"]


def test_a_game_ending_before_the_last_heal_plus_the_bound_is_a_short_tail():
    history = _clean()
    history.faults.append(FaultRecord("partition-redis", 60.0, 85.0, 2))
    assert _kinds(history) == ["short-tail"]


def test_faults_count_what_was_injected_not_what_was_planned():
    records = [
        FaultRecord("kill", 1.0, 2.0, 0, ("h0w0",)),
        FaultRecord("pause", 3.0, 3.0, 0, ("h0w0",), injected=False),
        FaultRecord("exited", 4.0, 6.0, 1, ("h1w0",)),
    ]
    counts = injected_counts(records, FAULT_KINDS)
    assert counts["kill"] == 1 and counts["pause"] == 0 and sum(counts.values()) == 1


def test_each_kill_is_timed_from_the_kill_to_its_workers_matches_streaming_again():
    history = _clean()  # a kill at 30 s of h0w0's stream; the successor's first live data at 38 s
    assert check(history, bound_seconds=BOUND).kill_takeovers == [8.0]
    assert "slow-kill-takeover" in [
        v["kind"] for v in check(history, bound_seconds=BOUND, kill_bound_seconds=3.0).violations
    ]
    assert check(history, bound_seconds=BOUND, kill_bound_seconds=8.0).ok


def test_a_kill_of_a_worker_that_streamed_nothing_times_no_takeover():
    history = _clean()
    history.faults = [FaultRecord("kill", 30.0, 33.0, 1, ("h1w1",), down=(("h1w1", 30.0, 33.0),))]
    assert check(history, bound_seconds=BOUND).kill_takeovers == []


@pytest.mark.parametrize(
    "other",
    [
        FaultRecord("redis-restart", 30.2, 31.5),  # every liveness signal and lease lost with its data
        FaultRecord("partition-feed", 31.0, 45.0, 1),  # the successor's host refused by the feed
        FaultRecord("clock-skew", 32.0, 60.0, 1, ("h1w0",)),  # the successor's worker restarted skewed
    ],
    ids=lambda f: f.kind,
)
def test_a_kill_with_a_redis_restart_or_a_fault_of_the_successors_host_meanwhile_is_judged_by_the_bound(
    other,
):
    history = _clean()  # the kill at 30 s, the successor on h1w0 live at 38 s
    history.faults.append(other)
    verdict = check(history, bound_seconds=BOUND, kill_bound_seconds=3.0)
    assert len(verdict.kill_takeovers) == 1 and verdict.kill_takeovers_alone == []  # (a restart is excused)
    assert "slow-kill-takeover" not in [v["kind"] for v in verdict.violations]
    # ... and by the recovery bound, as every gap is
    assert "slow-recovery" in [v["kind"] for v in check(history, bound_seconds=6.0).violations]


@pytest.mark.parametrize(
    "other",
    [
        FaultRecord("partition-feed", 31.0, 45.0, 2),  # a host that took nothing over
        FaultRecord("redis-restart", 38.5, 40.0),  # after the successor streamed
        FaultRecord("pause", 20.0, 29.0, 1, ("h1w0",), frozen=("h1w0",)),  # healed before the kill
    ],
    ids=["another host", "after the takeover", "before the kill"],
)
def test_a_kill_with_no_fault_in_its_way_is_judged_by_the_kill_bound(other):
    history = _clean()
    history.faults.append(other)
    verdict = check(history, bound_seconds=BOUND, kill_bound_seconds=3.0)
    assert verdict.kill_takeovers_alone == [8.0]
    assert "slow-kill-takeover" in [v["kind"] for v in verdict.violations]


def test_a_kills_takeover_leaves_out_the_time_no_worker_could_stream():
    history = _clean()
    # Every other slot paused from 31 to 36 s, the killed one down until 33 s: 2 of the 8 s no worker
    # could stream the match.
    others = tuple(slot for slot in SLOTS if slot != "h0w0")
    history.faults.append(FaultRecord("pause", 31.0, 36.0, None, others, frozen=others))
    assert check(history, bound_seconds=BOUND).kill_takeovers == [6.0]
