"""Gapless runs against srsim in process: every event of the game in the archive once, whatever the gaps.

Each test ends by comparing the archive's current state with srsim's whole game (every event
once in its final version, deletes removed): the archive holds every distinct message once, and
the pipeline issued and settled each at-bat's question once.
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from collections import Counter

import pytest

from listener.body import ListenerContext
from listener.events import FROM_PLAY_BY_PLAY, FROM_RESUME, backfilled_from, message_key
from listener.exit_codes import ExitCode
from listener.play_by_play import PlayByPlay
from listener.verify import compare
from models import Match, MatchListenerRecord, Question
from srsim.pbp import final_events
from srsim.script import GameScript
from tests.listener.conftest import recorded, start_listener
from tests.waiting import wait_for

#: Long enough to drop a connection mid-game and see it come back (about 5 s of stream).
EVENTS = 120
INTERVAL = 0.04


def _game() -> GameScript:
    return GameScript(
        sr_id=str(uuid.uuid4()),
        league="mlb",
        start_after=0.3,
        event_interval=INTERVAL,
        event_count=EVENTS,
        corrections=3,
        deletes=2,
    )


def _run(match, settings) -> tuple[ListenerContext, MatchListenerRecord]:
    record = MatchListenerRecord.create(match=match)
    ctx = ListenerContext(match_id=str(match.id), record_id=str(record.id), is_test=False, settings=settings)
    return ctx, record


def _settings(listener_settings, server, **kw):
    values = {
        "sportradar_base_url": server.base_url,
        "listener_reconnect_backoff_seconds": 0.5,  # events go on meanwhile: the gap misses some
        "listener_reconnect_backoff_max_seconds": 0.5,
        "listener_reconnect_attempts": 5,
        "listener_backfill_backoff_seconds": 0.05,
        "listener_backfill_backoff_max_seconds": 0.1,
        # srsim beats every 0.05 s here: a busy machine's pause is no silence worth a gap.
        "listener_gap_heartbeats": 40,
        # ... nor a game over: 20 s of beats without an event (these games end with their status).
        "listener_max_consecutive_heartbeats": 400,
    }
    values.update(kw)
    return listener_settings(**values)


def _assert_complete(server, game: GameScript, path) -> list:
    """The archive agrees with srsim's whole game, each distinct message once; returns its messages."""
    messages = recorded(path)
    sent = [json.loads(line) for line in server.sessions[game.sr_id].lines]
    verdict = compare(messages, PlayByPlay(game={}, events=final_events(sent)))
    assert verdict.ok, verdict
    keys = Counter(message_key(m) for m in messages if message_key(m) is not None)
    assert max(keys.values()) == 1, [k for k, n in keys.items() if n > 1]
    return messages


def _assert_questions_once(match, game: GameScript) -> None:
    atbats = (game.event_count + 3) // 4
    questions = list(Question.select().where(Question.match == match.id))
    assert len(questions) == atbats == len({q.key for q in questions})
    assert all(q.status == "settled" for q in questions), [q.key for q in questions if q.status != "settled"]


def _drop_after(server, out, sr_id: str, events: int) -> None:
    wait_for(lambda: out.listener.stats.events >= events, timeout=20, what=f"{events} events recorded")
    assert server.drop_streams(sr_id) >= 1


@pytest.mark.parametrize(
    ("sim_options", "recovered_by"),
    [
        ({}, FROM_RESUME),
        ({"resume": False}, FROM_PLAY_BY_PLAY),
        ({"resume_window_seconds": 0.1}, FROM_PLAY_BY_PLAY),  # the window passed: refused, 410
    ],
    ids=["resumed", "feed-without-resume", "resume-window-passed"],
)
def test_a_dropped_connection_loses_nothing(sim, listener_settings, make_match, sim_options, recovered_by):
    game = _game()
    match = make_match("mlb", sr_id=game.sr_id)
    server = sim([game], **sim_options)
    ctx, record = _run(match, _settings(listener_settings, server))
    out = start_listener(ctx)
    _drop_after(server, out, game.sr_id, 20)
    out.thread.join(40)
    assert out.code == ExitCode.NOT_IN_PROGRESS, out.listener.exit_reason
    messages = _assert_complete(server, game, out.listener)
    sources = Counter(backfilled_from(m) for m in messages)
    assert sources[recovered_by] >= 1 and set(sources) <= {None, recovered_by}
    row = MatchListenerRecord.get_by_id(record.id)
    assert row.gaps == 1 and row.gap_seconds > 0 and row.gaps_unrecovered == 0
    assert row.events_backfilled == sources[recovered_by]
    # The game over, the listener compared its archive with the play-by-play: stored on the match.
    verification = Match.get_by_id(match.id).archive_verification
    assert verification["ok"] is True and verification["events"] > 0 and row.events_unrecovered == 0
    if recovered_by == FROM_RESUME:
        assert out.listener.stats.duplicates >= 1  # the resumed message came again, not recorded again
    _assert_questions_once(match, game)


def test_a_failing_play_by_play_leaves_the_gap_unrecovered_until_a_later_one_succeeds(
    sim, listener_settings, make_match, caplog
):
    game = _game()
    match = make_match("mlb", sr_id=game.sr_id)
    server = sim([game], resume=False)
    server.pbp_faults.extend(["notjson", "noids", "404", "503"])
    settings = _settings(listener_settings, server, listener_backfill_attempts=4)
    ctx, record = _run(match, settings)
    caplog.set_level(logging.WARNING, logger="listener.backfill")
    out = start_listener(ctx)
    _drop_after(server, out, game.sr_id, 15)
    row = wait_for(
        lambda: MatchListenerRecord.get_or_none(
            (MatchListenerRecord.id == record.id) & (MatchListenerRecord.gaps_unrecovered == 1)
        ),
        timeout=20,
        what="the gap recorded as unrecovered",
    )
    assert row.events_backfilled == 0
    tries = [r.getMessage() for r in caplog.records if "backfill try" in r.getMessage()]
    assert len(tries) == 4  # one line per failed try, each naming what was wrong
    for word in ("not JSON", "no id", "HTTP 404", "HTTP 503"):
        assert any(word in t for t in tries), (word, tries)
    streaming = out.listener.stats.events
    wait_for(lambda: out.listener.stats.events > streaming + 5, timeout=20, what="the stream going on")
    _drop_after(server, out, game.sr_id, streaming + 10)  # a later gap: its backfill recovers both
    wait_for(
        lambda: MatchListenerRecord.get_or_none(
            (MatchListenerRecord.id == record.id)
            & (MatchListenerRecord.gaps == 2)
            & (MatchListenerRecord.gaps_unrecovered == 0)
        ),
        timeout=20,
        what="both gaps recovered",
    )
    out.thread.join(40)
    assert out.code == ExitCode.NOT_IN_PROGRESS, out.listener.exit_reason
    _assert_complete(server, game, out.listener)
    _assert_questions_once(match, game)


def test_a_stop_then_a_start_backfills_what_was_sent_meanwhile_and_handles_each_event_once(
    sim, listener_settings, make_match
):
    game = _game()
    match = make_match("mlb", sr_id=game.sr_id)
    server = sim([game], resume=False)
    settings = _settings(listener_settings, server)
    first_ctx, _ = _run(match, settings)
    first = start_listener(first_ctx)
    wait_for(lambda: first.listener.stats.events >= 20, timeout=20, what="20 events recorded")
    first.listener.request_stop()
    first.thread.join(10)
    assert first.code == ExitCode.STOPPED
    held = first.listener.stats.events
    session = server.sessions[game.sr_id]
    wait_for(lambda: session.position() > held + 15, timeout=20, what="15 more messages sent meanwhile")
    ctx, record = _run(match, settings)
    second = start_listener(ctx)
    second.thread.join(40)
    assert second.code == ExitCode.NOT_IN_PROGRESS, second.listener.exit_reason
    _assert_complete(server, game, second.listener)
    row = MatchListenerRecord.get_by_id(record.id)
    assert row.gaps == 1 and row.events_backfilled >= 10  # the takeover's gap, recovered
    assert server.pbp_requests[game.sr_id] >= 1
    _assert_questions_once(match, game)


def test_with_backfill_off_a_gap_is_recorded_and_left_as_it_is(sim, listener_settings, make_match):
    game = _game()
    match = make_match("mlb", sr_id=game.sr_id)
    server = sim([game], resume=False)
    ctx, record = _run(match, _settings(listener_settings, server, listener_backfill=False))
    out = start_listener(ctx)
    _drop_after(server, out, game.sr_id, 20)
    out.thread.join(40)
    assert out.code == ExitCode.NOT_IN_PROGRESS
    row = MatchListenerRecord.get_by_id(record.id)
    assert (row.gaps, row.gaps_unrecovered, row.events_backfilled) == (1, 1, 0)
    assert server.pbp_requests[game.sr_id] == 1  # only the comparison once the game is over
    sent = [json.loads(line) for line in server.sessions[game.sr_id].lines]
    verdict = compare(recorded(out.listener), PlayByPlay(game={}, events=final_events(sent)))
    assert verdict.missing  # what the gap missed is visible, not silently absent
    stored = Match.get_by_id(match.id).archive_verification
    assert stored["ok"] is False and stored["missing_count"] == len(verdict.missing) == row.events_unrecovered


def test_a_long_silence_is_a_gap_and_is_backfilled(sim, listener_settings, make_match, monkeypatch):
    game = _game()
    match = make_match("mlb", sr_id=game.sr_id)
    server = sim([game], resume=False, heartbeat_seconds=0.1)
    ctx, record = _run(match, _settings(listener_settings, server, listener_gap_heartbeats=2))
    out = start_listener(ctx)
    wait_for(lambda: out.listener.stats.events >= 20, timeout=20, what="20 events recorded")
    # Hold the stream loop for a while: to the listener the stream is silent, then comes back.
    original = out.listener._handle
    held = {"done": False}

    def slow(raw):
        if not held["done"]:
            held["done"] = True
            time.sleep(0.6)  # > 2 heartbeat intervals of 0.1 s
        return original(raw)

    monkeypatch.setattr(out.listener, "_handle", slow)
    out.thread.join(40)
    assert out.code == ExitCode.NOT_IN_PROGRESS, out.listener.exit_reason
    row = MatchListenerRecord.get_by_id(record.id)
    assert row.gaps >= 1 and row.gaps_unrecovered == 0
    _assert_complete(server, game, out.listener)
