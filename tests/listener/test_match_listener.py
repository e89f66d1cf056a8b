"""MatchListener against srsim in process: whole games, status writes, rain delays, exits and stops."""

from __future__ import annotations

import json
import time
import uuid

import pytest

from listener.archive import archive_path, shortcode_for
from listener.body import ListenerContext
from listener.exit_codes import ExitCode
from models import Match, Question
from srsim.script import GameScript
from tests.intervals import SLACK_SECONDS
from tests.listener.conftest import recorded, run_listener, start_listener


def _game(**kw) -> GameScript:
    values = {"sr_id": str(uuid.uuid4()), "league": "mlb", "start_after": 0.4, "event_interval": 0.03}
    values.update(kw)
    return GameScript(**values)


def _ctx(match, settings, *, record_id=None) -> ListenerContext:
    return ListenerContext(
        match_id=str(match.id), record_id=record_id, is_test=match.is_test, settings=settings
    )


def _statuses_seen(match_id: str, *, until: float, into: list[str], thread) -> None:
    """Poll Match.status (test thread) and remember each distinct value in order, until the run ends."""
    while time.monotonic() < until and thread.is_alive():
        status = Match.get_by_id(match_id).status
        if not into or into[-1] != status:
            into.append(status)
        time.sleep(0.01)


def test_a_whole_live_game_is_archived_in_order_and_ends_with_exit_13(sim, listener_settings, make_match):
    game = _game(event_count=24, game_delay_at_event=8, delay_seconds=1.0)
    match = make_match("mlb", sr_id=game.sr_id, is_test=False)
    server = sim([game])
    # Every event in the order sent, all from the stream: a stream given up as silent after 1 s (the
    # in-process simulator starved on CI's loaded box) had its missed events backfilled, out of order.
    settings = listener_settings(
        sportradar_base_url=server.base_url, listener_gap_heartbeats=100, listener_read_timeout_seconds=10.0
    )
    out = start_listener(_ctx(match, settings, record_id=str(uuid.uuid4())))
    seen: list[str] = []
    _statuses_seen(str(match.id), until=time.monotonic() + 15, into=seen, thread=out.thread)
    out.thread.join(20)
    assert out.code == ExitCode.NOT_IN_PROGRESS, out.listener.exit_reason
    events = [e for e in recorded(out.listener) if "payload" in e]
    assert len(events) == game.total_events == 25
    expected = [json.loads(line) for line in server.sessions[game.sr_id].lines]
    assert events == expected  # every event, in the order sent
    assert seen[:4] == ["scheduled", "inprogress", "delayed", "inprogress"]
    assert Match.get_by_id(match.id).status == "complete"


def test_a_live_game_writes_a_text_log_named_after_the_record(sim, listener_settings, make_match):
    game = _game(event_count=4)
    match = make_match("mlb", sr_id=game.sr_id)
    settings = listener_settings(sportradar_base_url=sim([game]).base_url)
    record_id = str(uuid.uuid4())
    run_listener(_ctx(match, settings, record_id=record_id))
    path = archive_path(settings.data_dir, "mlb", shortcode_for(game.sr_id))
    log = path.with_name(f"{path.stem}.{record_id[:8]}.log")
    text = log.read_text()
    assert "connected" in text and "exit 13" in text
    assert "test-api-key-never-printed" not in text


def test_an_is_test_game_leaves_status_to_srsim_and_exits_13_when_closed(sim, listener_settings, make_match):
    game = _game(event_count=10, game_delay_at_event=3, delay_seconds=0.3)
    match = make_match("mlb", sr_id=game.sr_id, is_test=True)
    server = sim([game])
    # every event from the stream (as the whole-game test above): a stream given up as silent after a
    # few heartbeats of a starved in-process simulator had its events backfilled, the live copies then
    # counted as duplicates (CI: 7 events and 4 duplicates)
    settings = listener_settings(
        sportradar_base_url=server.base_url, listener_gap_heartbeats=100, listener_read_timeout_seconds=10.0
    )
    out = run_listener(_ctx(match, settings), timeout=20)
    assert out.code == ExitCode.NOT_IN_PROGRESS
    assert Match.get_by_id(match.id).status == "closed"  # srsim's write, not the stream's "complete"
    writer_log = [s for sr, s in server.status_writer.written if sr == game.sr_id]
    assert writer_log == ["inprogress", "delayed", "inprogress", "closed"]
    assert out.listener.stats.events == 11


def test_a_rain_delay_longer_than_the_heartbeat_limit_keeps_the_listener_up(
    sim, listener_settings, make_match
):
    # 60 heartbeats of delay against a limit of 12: only the delayed status checks keep it alive.
    game = _game(event_count=6, game_delay_at_event=2, delay_seconds=3.0)
    match = make_match("mlb", sr_id=game.sr_id, is_test=True)
    server = sim([game])
    settings = listener_settings(
        sportradar_base_url=server.base_url,
        listener_max_consecutive_heartbeats=12,
        listener_status_reload_heartbeats=4,
        # srsim beats every 0.05 s here: a loaded box's pause of this process (srsim's thread and the
        # listener's share it) is no silence worth a gap, whose marker this test would count
        listener_gap_heartbeats=40,
    )
    out = run_listener(_ctx(match, settings), timeout=20)
    assert out.code == ExitCode.NOT_IN_PROGRESS
    archive = recorded(out.listener)
    # Every event once, live or (a listener started after the first one, on a loaded box) from the
    # start's play-by-play backfill.
    events = [e for e in archive if "marker" not in e.get("kickoff", {})]
    assert len(events) == 7 and out.listener.stats.events <= 7
    markers = [e["kickoff"] for e in archive if "marker" in e.get("kickoff", {})]
    assert markers and all(m["marker"] == "delay" and m["status"] == "delayed" for m in markers)
    assert out.listener.stats.delay_markers == len(markers)


@pytest.mark.parametrize("status", ["postponed", "cancelled"])
def test_a_postponed_or_cancelled_match_ends_the_listener_with_13(status, sim, listener_settings, make_match):
    game = _game(event_count=3, start_after=60)  # never starts: heartbeats only
    match = make_match("mlb", sr_id=game.sr_id, is_test=True, status="delayed")
    settings = listener_settings(sportradar_base_url=sim([game], write_status=False).base_url)
    out = start_listener(_ctx(match, settings))
    time.sleep(0.3)
    assert out.thread.is_alive()  # delayed: still up
    Match.update(status=status).where(Match.id == match.id).execute()
    out.thread.join(5)
    assert out.code == ExitCode.NOT_IN_PROGRESS
    assert status in out.listener.exit_reason


def test_too_many_heartbeats_without_an_event_exit_10(sim, listener_settings, make_match):
    game = _game(event_count=3, start_after=60)
    match = make_match("mlb", sr_id=game.sr_id, status="inprogress")
    settings = listener_settings(
        sportradar_base_url=sim([game]).base_url, listener_max_consecutive_heartbeats=6
    )
    out = run_listener(_ctx(match, settings), timeout=10)
    assert out.code == ExitCode.MAX_HEARTBEATS
    assert out.listener.stats.heartbeats == 6


#: The spec's table: (status kept locally, status the stream brings, status persisted), by case name.
STREAM_STATUS_TABLE = {
    "first-live-event": ("scheduled", "inprogress", "inprogress"),
    "delay-from-feed": ("inprogress", "delayed", "delayed"),
    "delay-ended": ("delayed", "inprogress", "inprogress"),
    "game-over": ("inprogress", "complete", "complete"),
    "no-pregame-write": ("scheduled", "scheduled", "scheduled"),
    "never-reopen": ("closed", "inprogress", "closed"),
}


@pytest.mark.parametrize(
    ("local", "incoming", "persist"), STREAM_STATUS_TABLE.values(), ids=STREAM_STATUS_TABLE.keys()
)
def test_the_stream_status_of_a_live_match_is_persisted_as_the_spec_table_says(
    local, incoming, persist, raw_feed, listener_settings, make_match
):
    sr_id = str(uuid.uuid4())
    match = make_match("mlb", sr_id=sr_id, status=local)
    event = {
        "payload": {"game": {"id": sr_id, "status": incoming}, "event": {"id": "e1", "type": "pitch"}},
        "metadata": {"match": f"sd:match:{sr_id}", "operation": "update"},
    }
    body = (json.dumps(event) + "\n" + '{"heartbeat":{"interval":5000}}\n' * 3).encode()
    feed = raw_feed(body)
    settings = listener_settings(sportradar_base_url=feed.base_url, listener_reconnect_attempts=0)
    run_listener(_ctx(match, settings), timeout=10)
    assert Match.get_by_id(match.id).status == persist


def test_listener_force_exit_code_exits_before_any_stream_work(listener_settings, make_match):
    match = make_match("mlb")
    settings = listener_settings(listener_force_exit_code=11, sportradar_base_url="http://127.0.0.1:9")
    out = run_listener(_ctx(match, settings), timeout=5)
    assert out.code == 11
    assert out.listener.archive is None  # no archive opened, no connection made


def test_request_stop_ends_a_running_listener_within_a_second_with_15(sim, listener_settings, make_match):
    game = _game(event_count=3, start_after=60)
    match = make_match("mlb", sr_id=game.sr_id)
    settings = listener_settings(
        sportradar_base_url=sim([game], heartbeat_seconds=30).base_url, listener_read_timeout_seconds=60
    )
    ctx = _ctx(match, settings)
    out = start_listener(ctx)
    time.sleep(0.3)  # connected, blocked reading (next heartbeat in 30 s)
    t0 = time.monotonic()
    ctx.stop_requested.set()
    out.listener.request_stop()
    out.thread.join(1.0 + SLACK_SECONDS)
    assert not out.thread.is_alive()
    # Woken by the stop, not by the next heartbeat (30 s) or the read timeout (60 s).
    assert time.monotonic() - t0 < 1.0 + SLACK_SECONDS
    assert out.code == ExitCode.STOPPED


def test_the_default_pipeline_issues_and_settles_in_game_questions(sim, listener_settings, make_match):
    game = _game(event_count=12)  # three at-bats: hit, out, out
    match = make_match("mlb", sr_id=game.sr_id)
    # Only the stream's closing status ends this run (a live match: no status reload brings it). A
    # stream given up as silent after 1 s, the in-process simulator starved on a loaded box, came
    # back after the game had closed: exit 10 once the heartbeats ran out. 5 s of silence it is.
    settings = listener_settings(
        sportradar_base_url=sim([game]).base_url,
        listener_gap_heartbeats=100,
        listener_read_timeout_seconds=10.0,
    )
    out = run_listener(_ctx(match, settings), timeout=30)
    assert out.code == ExitCode.NOT_IN_PROGRESS
    questions = list(Question.select().where(Question.match == match.id).order_by(Question.issued_at))
    assert len(questions) == 3
    assert [q.answer for q in questions] == ["yes", "no", "no"]
    assert all(q.status == "settled" and q.in_game for q in questions)
    assert Match.get_by_id(match.id).has_in_game_questions()


def test_skip_processing_records_events_without_questions(sim, listener_settings, make_match):
    game = _game(event_count=8)
    match = make_match("mlb", sr_id=game.sr_id)
    settings = listener_settings(sportradar_base_url=sim([game]).base_url, listener_skip_processing=True)
    out = run_listener(_ctx(match, settings), timeout=15)
    assert out.listener.stats.events == 8
    assert Question.select().where(Question.match == match.id).count() == 0


class RaisingPipeline:
    """A pipeline that raises what its settings name on the first event (to test the exit mapping)."""

    raises: type[BaseException] = RuntimeError
    arg: object = "boom"

    def __init__(self, **_: object) -> None:
        pass

    def process(self, message: dict) -> None:
        raise self.raises(self.arg)

    def close(self) -> None:
        pass


def _run_with_pipeline(pipeline: str, sim, listener_settings, make_match):
    """Run the default body over a three-event game with the pipeline class ``pipeline`` of this module."""
    game = _game(event_count=3)
    match = make_match("mlb", sr_id=game.sr_id)
    settings = listener_settings(
        sportradar_base_url=sim([game]).base_url,
        listener_pipeline=f"tests.listener.test_match_listener:{pipeline}",
    )
    return run_listener(_ctx(match, settings), timeout=10)


class CancellingPipeline(RaisingPipeline):
    raises = KeyboardInterrupt


@pytest.mark.parametrize(
    ("pipeline", "code"),
    [("RaisingPipeline", ExitCode.UNEXPECTED_ERROR), ("CancellingPipeline", ExitCode.CANCELLED)],
    ids=["unexpected-exception-9", "unexpected-cancel-16"],
)
def test_an_unexpected_error_or_cancel_maps_to_its_exit_code(
    pipeline, code, sim, listener_settings, make_match
):
    out = _run_with_pipeline(pipeline, sim, listener_settings, make_match)
    assert out.code == code
    assert "boom" in out.listener.exit_reason or "KeyboardInterrupt" in out.listener.exit_reason


class ExitNonePipeline(RaisingPipeline):
    """``sys.exit()`` inside the default body's pipeline."""

    raises, arg = SystemExit, None


class ExitThreePipeline(RaisingPipeline):
    raises, arg = SystemExit, 3


class ExitMessagePipeline(RaisingPipeline):
    raises, arg = SystemExit, "feed gone"


@pytest.mark.parametrize(
    ("pipeline", "code"),
    [("ExitNonePipeline", 0), ("ExitThreePipeline", 3), ("ExitMessagePipeline", 1)],
    ids=["SystemExit(None)-is-0", "SystemExit(3)-is-3", "SystemExit(msg)-is-1"],
)
def test_system_exit_in_the_default_body_maps_like_a_process_exit(
    pipeline, code, sim, listener_settings, make_match
):
    out = _run_with_pipeline(pipeline, sim, listener_settings, make_match)
    assert out.code == code, out.listener.exit_reason


def _feed_of(sr_id: str, *events: dict) -> bytes:
    lines = [json.dumps(e) for e in events] + ['{"heartbeat":{"interval":5000}}'] * 3
    return ("\n".join(lines) + "\n").encode()


@pytest.mark.parametrize(
    ("sources", "persist"),
    [
        ({"payload.game", "payload", "game", "top", "metadata"}, "delayed"),
        ({"payload", "game", "top", "metadata"}, "wdelay"),
        ({"game", "top", "metadata"}, "fdelay"),
        ({"top", "metadata"}, "odelay"),
        ({"metadata"}, "inprogress"),
    ],
    ids=[
        "payload.game.status-first",
        "then-payload.status",
        "then-game.status",
        "then-status",
        "not-metadata",
    ],
)
def test_the_stream_status_is_read_from_its_sources_in_the_spec_order(
    sources, persist, raw_feed, listener_settings, make_match
):
    sr_id = str(uuid.uuid4())
    match = make_match("mlb", sr_id=sr_id, status="inprogress")
    event: dict = {
        "payload": {"game": {"id": sr_id}, "event": {"id": "e1", "type": "pitch"}},
        "metadata": {"match": f"sd:match:{sr_id}", "operation": "update"},
    }
    if "payload.game" in sources:
        event["payload"]["game"]["status"] = "delayed"
    if "payload" in sources:
        event["payload"]["status"] = "wdelay"
    if "game" in sources:
        event["game"] = {"status": "fdelay"}
    if "top" in sources:
        event["status"] = "odelay"
    if "metadata" in sources:
        event["metadata"]["status"] = "suspended"
    feed = raw_feed(_feed_of(sr_id, event))
    settings = listener_settings(sportradar_base_url=feed.base_url, listener_reconnect_attempts=0)
    run_listener(_ctx(match, settings), timeout=10)
    assert Match.get_by_id(match.id).status == persist


def test_complete_then_closed_on_the_stream_persists_closed(raw_feed, listener_settings, make_match):
    sr_id = str(uuid.uuid4())
    match = make_match("mlb", sr_id=sr_id, status="inprogress")

    def event(n: int, status: str) -> dict:
        return {
            "payload": {"game": {"id": sr_id, "status": status}, "event": {"id": f"e{n}", "type": "pitch"}},
            "metadata": {"match": f"sd:match:{sr_id}", "operation": "update"},
        }

    feed = raw_feed(_feed_of(sr_id, event(1, "complete"), event(2, "closed"), event(3, "complete")))
    settings = listener_settings(sportradar_base_url=feed.base_url, listener_reconnect_attempts=0)
    run_listener(_ctx(match, settings), timeout=10)
    assert Match.get_by_id(match.id).status == "closed"
