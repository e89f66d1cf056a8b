"""The history store and the recorder against real PostgreSQL."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from config.clock import utcnow
from config.errors import InvalidQuery
from models.db import database
from models.history import add_points, history, minute_of, prune_history, put_points
from models.history_recorder import HistoryRecorder

#: A fixed "now" in the middle of a minute, so the buckets of a test do not move while it runs.
NOW = datetime(2030, 6, 1, 12, 30, 30, tzinfo=UTC)
M = minute_of(NOW)


def _point(series: str, key: str, minutes_ago: int, value: float) -> dict:
    return {(series, key, M - timedelta(minutes=minutes_ago)): value}


def _stored(series: str) -> dict[tuple[str, datetime], float]:
    rows = database.execute_sql(
        "SELECT key, minute, value FROM history_points WHERE series = %s", (series,)
    ).fetchall()
    return {(key, minute): value for key, minute, value in rows}


def test_add_points_adds_to_a_minute_and_put_points_replaces_it(db):
    add_points(_point("events", "m1", 0, 3))
    add_points({**_point("events", "m1", 0, 4), **_point("events", "m2", 0, 1)})
    assert _stored("events") == {("m1", M): 7.0, ("m2", M): 1.0}
    put_points(_point("events", "m1", 0, 2))
    assert _stored("events")[("m1", M)] == 2.0


def test_a_counter_bucket_is_the_mean_per_minute_and_a_missing_minute_counts_zero(db):
    # 24h: 5-minute buckets; 10 + 20 events in two minutes of the bucket before the current one
    current = int(NOW.timestamp()) // 300 * 300
    before = datetime.fromtimestamp(current - 300, tz=UTC)
    add_points({("events", "m1", before): 10, ("events", "m1", before + timedelta(minutes=2)): 20})
    answer = history("events", range_name="24h", now=NOW)
    assert answer.step_seconds == 300 and answer.times[-1] == current and len(answer.times) == 288
    assert answer.values["all"][-2] == 6.0  # 30 events over the bucket's 5 minutes
    assert answer.values["all"][-1] == 0.0 and answer.values["m1"][-2] == 6.0
    assert answer.kind == "counter" and answer.unit == "events/min"


def test_a_gauge_bucket_is_the_mean_of_its_readings_and_none_without_one(db):
    put_points({**_point("listeners", "Running", 1, 4), **_point("listeners", "Running", 2, 2)})
    put_points(_point("listeners", "Stale", 1, 1))
    answer = history("listeners", range_name="24h", now=NOW)
    bucket = answer.times.index(int((M - timedelta(minutes=1)).timestamp()) // 300 * 300)
    assert answer.values["Running"][bucket] == 3.0 and answer.values["Stale"][bucket] == 1.0
    assert answer.values["all"][bucket] == 4.0  # each badge's mean, summed
    assert answer.values["Running"][0] is None and answer.values["all"][0] is None


def test_the_busiest_keys_get_a_line_labelled_with_the_match_title_and_the_others_count_in_all(
    db, make_match
):
    hou = make_match("mlb", title="HOU @ KC")
    quiet = make_match("mlb", title="NYY @ BOS")
    add_points({**_point("events", str(hou.id), 0, 50), **_point("events", str(quiet.id), 0, 5)})
    add_points(_point("events", "not-a-match", 0, 1))
    answer = history("events", range_name="1h", top=1, now=NOW)
    assert set(answer.values) == {"all", str(hou.id)} and answer.keys == 3
    assert answer.values["all"][-1] == 56.0 and answer.labels[str(hou.id)] == "HOU @ KC (mlb)"
    one = history("events", range_name="1h", key=str(quiet.id), now=NOW)
    assert list(one.values) == [str(quiet.id)] and one.values[str(quiet.id)][-1] == 5.0
    assert one.labels[str(quiet.id)] == "NYY @ BOS (mlb)"


def test_an_unkeyed_series_has_one_line_named_after_it(db):
    answer = history("takeovers", range_name="1h", now=NOW)
    assert list(answer.values) == ["all"] and answer.labels["all"] == "Takeovers"
    assert answer.values["all"] == [0.0] * 60


@pytest.mark.parametrize(
    ("args", "field"),
    [
        (("nope",), "series"),
        (("events", "2h"), "range"),
        (("events", "1h", 0), "top"),
        (("events", "1h", 51), "top"),
    ],
)
def test_an_unknown_series_or_range_or_a_top_out_of_bounds_is_refused_naming_it(db, args, field):
    name, *rest = args
    kwargs = dict(zip(("range_name", "top"), rest, strict=False))
    with pytest.raises(InvalidQuery) as caught:
        history(name, **kwargs)
    assert caught.value.field == field


def test_prune_deletes_only_the_points_older_than_the_retention(db):
    add_points({**_point("events", "m", 0, 1), **_point("events", "m", 8 * 1440 + 1, 1)})
    assert prune_history(days=8, now=NOW) == 1
    assert list(_stored("events")) == [("m", M)]


def test_the_recorder_adds_its_counts_to_their_minute_and_counts_nothing_before_it_is_enabled(db):
    recorder = HistoryRecorder()
    recorder.count("triggers", "recorder_test queued")
    assert recorder.pending() == 0
    recorder.enable()
    for _ in range(3):
        recorder.count("triggers", "recorder_test queued")
    recorder.count("gap_seconds", "m1", 2.5)
    assert recorder.flush() == 2 and recorder.pending() == 0
    now = minute_of(utcnow())
    stored = {k: v for (k, minute), v in _stored("triggers").items() if minute >= now - timedelta(minutes=1)}
    assert stored.get("recorder_test queued") == 3.0
    assert sum(v for (key, _), v in _stored("gap_seconds").items() if key == "m1") == 2.5
    assert recorder.flush() == 0


def test_the_recorder_keeps_at_most_its_bound_of_waiting_points_and_counts_what_it_dropped():
    recorder = HistoryRecorder()
    recorder.enable()
    recorder.max_pending = 2
    for key in ("a", "b", "c", "a"):
        recorder.count("events", key)
    assert recorder.pending() == 2 and recorder.dropped == 1
