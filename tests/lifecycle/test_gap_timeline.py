"""The match card's stream timeline: runs, gaps inside them, pauses between them (pure logic)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from lifecycle.gap_timeline import MIN_WIDTH, gap_timeline

T0 = datetime(2026, 5, 1, 19, 0, tzinfo=UTC)


def _run(rid: str, start: int, end: int | None, **more) -> dict:
    ended = None if end is None else (T0 + timedelta(seconds=end)).isoformat()
    return {
        "record_id": rid,
        "started_at": (T0 + timedelta(seconds=start)).isoformat(),
        "ended_at": ended,
        **more,
    }


def _gap(rid: str, began: int, ended: int, cause: str = "reconnect") -> tuple[str, dict]:
    at = lambda s: (T0 + timedelta(seconds=s)).isoformat()  # noqa: E731
    return rid, {
        "marker": "gap",
        "cause": cause,
        "began": at(began),
        "ended": at(ended),
        "how": "reconnected",
    }


def test_nothing_to_draw_without_a_run_or_a_gap() -> None:
    assert gap_timeline([], [], now=T0) is None


def test_a_gap_inside_a_run_and_the_pause_between_runs_are_placed_on_the_axis() -> None:
    runs = [_run("bbbbbbbb-2", 600, 1000), _run("aaaaaaaa-1", 0, 400)]  # newest first, as the card has them
    timeline = gap_timeline(runs, [_gap("aaaaaaaa-1", 100, 200)], now=T0 + timedelta(seconds=5000))
    assert (timeline.start, timeline.end) == (T0, T0 + timedelta(seconds=1000))
    assert [(r.left, r.width) for r in timeline.runs] == [(0.0, 40.0), (60.0, 40.0)]
    stream, pause = timeline.gaps
    assert (stream.kind, stream.left, stream.width, stream.seconds) == ("stream gap", 10.0, 10.0, 100.0)
    assert (pause.kind, pause.left, pause.width) == ("no listener", 40.0, 20.0)
    assert "between run aaaaaaaa and run bbbbbbbb" in pause.label


def test_an_open_run_reaches_now_and_a_short_gap_stays_visible() -> None:
    timeline = gap_timeline([_run("r1", 0, None)], [_gap("r1", 500, 500)], now=T0 + timedelta(seconds=10000))
    assert timeline.end == T0 + timedelta(seconds=10000)
    assert timeline.runs[0].label == "run r1 (open)"
    assert timeline.gaps[0].width == MIN_WIDTH


def test_a_runs_newest_gaps_are_the_unrecovered_ones_and_missing_events_are_named() -> None:
    runs = [_run("r1", 0, 100, gaps_unrecovered=1, events_unrecovered=7)]
    timeline = gap_timeline(runs, [_gap("r1", 10, 20), _gap("r1", 50, 60)], now=T0)
    assert [g.recovered for g in timeline.gaps] == [True, False]
    assert "(not recovered)" in timeline.gaps[1].label
    assert timeline.runs[0].label == "run r1, 7 events missing"
