"""Every declared league on real listener workers against srsim: each question of a whole game issued and
settled once, through a SIGKILL takeover and a play-by-play backfill, corrections settling again.

One short game per league (a few units each, reviews of how two units ended, corrections and a delete
of ordinary plays), all on one worker that is killed mid-game; a standby worker's reaper restarts
them, and the new runs backfill what the kill missed.
"""

from __future__ import annotations

import json
import pkgutil
import threading
import uuid

import pytest

from harness.ports import free_port
from listener.play_by_play import PlayByPlay
from listener.verify import compare
from models import Match, Question
from models.event_log import messages_of
from models.leagues import declared
from srsim.models import PER_UNIT
from srsim.pbp import final_events
from srsim.script import GameScript
from srsim.server import SimServer
from tests.lifecycle.conftest import REAL_WORKER_CTX, REAL_WORKER_DEFAULTS
from tests.lifecycle.helpers import OpenRowMonitor, dispatch_now, open_rows, rows_of
from tests.waiting import wait_for

pytestmark = [pytest.mark.e2e, REAL_WORKER_CTX]

#: Units per game, and the game's pace: about 20 s of stream, long enough for a kill and a takeover.
UNITS = 16
INTERVAL = 0.3


def _game(league: str) -> GameScript:
    return GameScript(
        sr_id=str(uuid.uuid4()),
        league=league,
        is_test=False,
        start_after=3.0,
        event_interval=INTERVAL,
        event_count=UNITS * PER_UNIT,
        corrections=2,
        deletes=1,
        resettles=2,
    )


def _archived(lifecycle_env, game: GameScript) -> list:
    """The game's messages in the match event log (every run's, in arrival order)."""
    match = Match.get_or_none(Match.sr_id == game.sr_id)
    return [] if match is None else messages_of(match.id)


def _finished(match) -> bool:
    rows = rows_of(match)
    return bool(rows) and all(r.ended_at is not None for r in rows) and rows[-1].exit_code == 13


def _final_answers(game: GameScript, sent: list[dict]) -> dict[str, str]:
    """Each unit's answer as the final version of the event that ended it says (the league's own reading)."""
    decl = next(d for d in declared() if d.name == game.league)
    reader = pkgutil.resolve_name(decl.pipeline)(match_id="", settings=None, db_gate=threading.Semaphore())
    answers = {}
    for event in final_events(sent):
        meta = {"event_category": event.get("event_category"), "operation": "update"}
        _, closing = reader.read(event, meta, {})
        if closing is not None and closing.key is not None:
            answers[closing.key] = closing.answer
    return answers


def test_every_leagues_questions_are_issued_and_settled_once_through_a_kill_and_a_backfill(
    make_match, ctx, send_start, start_worker, lifecycle_env
):
    games = [_game(d.name) for d in declared()]
    port = free_port()
    server = SimServer(games, heartbeat_seconds=1.0, port=port)
    try:
        matches = [make_match(g.league, sr_id=g.sr_id, status="inprogress") for g in games]
        env = {
            **REAL_WORKER_DEFAULTS,
            "LISTENER_BODY": "listener.match_listener:MatchListener",
            "SPORTRADAR_BASE_URL": f"http://127.0.0.1:{port}",
            "LISTENER_STATUS_RELOAD_HEARTBEATS": "3",
            "LISTENER_MAX_CONSECUTIVE_HEARTBEATS": "120",
        }
        with OpenRowMonitor(m.id for m in matches) as monitor:
            doomed = start_worker(env=env)
            # The games' clocks start once the worker is up (a loaded box boots it in tens of seconds):
            # each run must see the reviews live, before the kill, to settle those questions twice.
            server.start_background()
            assert dispatch_now(ctx, send_start).enqueued == len(games)
            for g in games:
                wait_for(
                    lambda g=g: len(_archived(lifecycle_env, g)) >= 12, timeout=60, what=f"{g.league} live"
                )
            start_worker(env=env)  # the standby
            doomed.kill()
            for m in matches:
                wait_for(lambda m=m: _finished(m), timeout=120, interval=0.5, what="the game over")
        assert monitor.max_open == 1
        for g, m in zip(games, matches, strict=True):
            sent = [json.loads(line) for line in server.sessions[g.sr_id].lines]
            verdict = compare(_archived(lifecycle_env, g), PlayByPlay(game={}, events=final_events(sent)))
            assert verdict.ok, (g.league, verdict)
            runs = rows_of(m)
            assert [r.exit_code for r in runs] == [14, 13], g.league  # killed, then the game over
            assert runs[1].gaps >= 1 and runs[1].gaps_unrecovered == 0, g.league
            questions = {q.key: q for q in Question.select().where(Question.match == m.id)}
            assert len(questions) == UNITS, (g.league, sorted(questions))
            assert all(q.status == "settled" for q in questions.values()), g.league
            assert {k: q.answer for k, q in questions.items()} == _final_answers(g, sent), g.league
            settles = sorted(len(q.details["settlements"]) for q in questions.values())
            assert settles == [1] * (UNITS - 2) + [2, 2], g.league  # the two reviews, before the kill
            assert not open_rows(m)
    finally:
        server.stop()
