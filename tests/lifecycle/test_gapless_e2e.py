"""Real listener workers against srsim: every event of each game in its event log once, across faults.

Each test plays whole games (about a minute of stream) on real ``dramatiq`` listener workers
running the real MatchListener, with default lease and heartbeat settings, on two listener hosts
that each have their own ``DATA_DIR`` (a takeover moves a game from one to the other), and ends by
comparing each match's event log with srsim's whole game: every distinct message once, each
event's current state equal to srsim's final version, each at-bat's question issued and settled
once, never two open lifecycle rows for one match; and, on an operator's box with a third
``DATA_DIR``, ``kickoff matches verify-archive`` ok and ``kickoff matches export`` holding the game.
"""

from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator

import pytest

from harness.background import BackgroundLoop
from lifecycle.lease import LEASE_EXPIRED
from lifecycle.takeover import WORKER_DIED
from listener.events import message_key
from listener.play_by_play import PlayByPlay
from listener.verify import compare
from models import Match, Question
from models.coordination import Locks
from models.event_log import messages_of
from srsim.pbp import final_events
from srsim.script import GameScript
from srsim.server import SimServer
from tests.lifecycle.conftest import REAL_WORKER_CTX, REAL_WORKER_DEFAULTS
from tests.lifecycle.helpers import (
    OpenRowMonitor,
    dispatch_now,
    mlb_games,
    open_rows,
    rows_of,
    written_after_successor,
)
from tests.waiting import wait_for

pytestmark = [pytest.mark.e2e, REAL_WORKER_CTX]

#: A game of about 70 s: long enough for a fault, a takeover and a second fault before it ends.
EVENTS = 280
INTERVAL = 0.25
GAME_DEADLINE = 240.0
#: A killed worker's games stream again on a standby within this (its liveness signal, not its lease).
KILL_TAKEOVER_BOUND = 3.0


@pytest.fixture
def feed() -> Iterator[SimServer]:
    """srsim in this process (the workers reach it over loopback), heartbeats every second."""
    servers: list[SimServer] = []

    def start(games: list[GameScript], **kw) -> SimServer:
        server = SimServer(games, heartbeat_seconds=1.0, **kw).start_background()
        servers.append(server)
        return server

    yield start  # type: ignore[misc]
    for server in servers:
        server.stop()


class FeedConnectionMonitor(BackgroundLoop):
    """Samples every 20 ms the most stream connections srsim holds open for any one of the matches."""

    def __init__(self, server: SimServer, sr_ids: list[str]) -> None:
        super().__init__()
        self.server, self.sr_ids, self.max_open = server, sr_ids, 0

    def step(self) -> None:
        self.max_open = max([self.max_open, *(self.server.connections(s) for s in self.sr_ids)])


def _games(n: int) -> list[GameScript]:
    return mlb_games(n, events=EVENTS, interval=INTERVAL)


def _env(server: SimServer, **extra: str) -> dict[str, str]:
    return {
        **REAL_WORKER_DEFAULTS,
        "LISTENER_BODY": "listener.match_listener:MatchListener",
        "SPORTRADAR_BASE_URL": server.base_url,
        "LISTENER_STATUS_RELOAD_HEARTBEATS": "3",
        "LISTENER_MAX_CONSECUTIVE_HEARTBEATS": "120",
        **extra,
    }


def _archived(lifecycle_env, game: GameScript) -> list:
    """The game's messages in its match's event log (PostgreSQL: every host's runs)."""
    return messages_of(Match.get(Match.sr_id == game.sr_id).id)


def _events_archived(lifecycle_env, game: GameScript) -> int:
    return sum(1 for m in _archived(lifecycle_env, game) if "payload" in m)


def _finished(match) -> bool:
    rows = rows_of(match)
    return bool(rows) and all(r.ended_at is not None for r in rows) and rows[-1].exit_code == 13


def _assert_complete(lifecycle_env, server: SimServer, game: GameScript, match) -> None:
    messages = _archived(lifecycle_env, game)
    sent = [json.loads(line) for line in server.sessions[game.sr_id].lines]
    verdict = compare(messages, PlayByPlay(game={}, events=final_events(sent)))
    assert verdict.ok, (game.sr_id, verdict)
    keys = Counter(message_key(m) for m in messages if message_key(m) is not None)
    assert max(keys.values()) == 1, [k for k, n in keys.items() if n > 1]
    questions = list(Question.select().where(Question.match == match.id))
    atbats = (EVENTS + 3) // 4
    assert len(questions) == atbats == len({q.key for q in questions})
    assert all(q.status == "settled" for q in questions)


def _hosts(tmp_path) -> tuple[dict[str, str], dict[str, str], dict[str, str]]:
    """DATA_DIR of listener host A, of listener host B and of the operator's box: three disks."""
    dirs = [tmp_path / name for name in ("host-a", "host-b", "operator")]
    for d in dirs:
        d.mkdir()
    return tuple({"DATA_DIR": str(d)} for d in dirs)  # type: ignore[return-value]


def _on_operators_box(subprocess_env, box: dict[str, str], matches, games, server) -> None:
    """``kickoff matches verify-archive`` ok and ``export`` holding srsim's whole game once, run on a
    box whose DATA_DIR no listener ever wrote."""
    kickoff = str(os.path.join(os.path.dirname(sys.executable), "kickoff"))
    env = {**subprocess_env, **box, "SPORTRADAR_BASE_URL": server.base_url}
    for g, m in zip(games, matches, strict=True):
        done = subprocess.run(
            [kickoff, "matches", "verify-archive", str(m.id)],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 0 and "archive ok" in done.stdout, done.stdout + done.stderr
        out = os.path.join(box["DATA_DIR"], f"{g.sr_id}.json")
        done = subprocess.run(
            [kickoff, "matches", "export", str(m.id), "--out", out],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 0, done.stderr
        with open(out, encoding="utf-8") as fh:
            messages = json.load(fh)
        sent = [json.loads(line) for line in server.sessions[g.sr_id].lines]
        assert compare(messages, PlayByPlay(game={}, events=final_events(sent))).ok
        keys = Counter(message_key(x) for x in messages if message_key(x) is not None)
        assert max(keys.values()) == 1
    assert not os.path.exists(os.path.join(box["DATA_DIR"], "listener"))  # no listener's file on the box


def _open_ids(matches) -> set[str]:
    return {str(r.id) for m in matches for r in open_rows(m)}


def _moved(match, old: set[str]) -> bool:
    """Whether ``match`` streams on a run started after ``old`` (the open row ids before a fault)."""
    return any(str(r.id) not in old for r in open_rows(match))


def _liveness_held(client, lease: str) -> bool:
    name = Locks.liveness_client_name(lease)
    return any(c["name"] == name for c in client.client_list())


def _kill_liveness_connection(client, lease: str) -> int:
    """CLIENT KILL the connection holding ``lease``'s liveness signal (only that worker's); how many."""
    name = Locks.liveness_client_name(lease)
    return sum(client.client_kill_filter(_id=c["id"]) for c in client.client_list() if c["name"] == name)


def test_killed_twice_and_paused_workers_on_two_hosts_lose_no_event_of_their_games(
    make_match, ctx, send_start, start_worker, feed, lifecycle_env, tmp_path, subprocess_env, redis_client
):
    games = _games(2)
    server = feed(games)
    matches = [make_match("mlb", sr_id=g.sr_id, status="inprogress") for g in games]
    env = _env(server)
    host_a, host_b, box = _hosts(tmp_path)
    with (
        OpenRowMonitor(m.id for m in matches) as rows_monitor,
        FeedConnectionMonitor(server, [g.sr_id for g in games]) as killed_monitor,
    ):
        doomed = start_worker(env={**env, **host_a})
        assert dispatch_now(ctx, send_start).enqueued == 2
        for g in games:
            wait_for(lambda g=g: _events_archived(lifecycle_env, g) >= 15, timeout=60, what="15 events")
        standby = start_worker(env={**env, **host_b})  # another host: none of A's files
        before = _open_ids(matches)
        # Redis drops the doomed worker's liveness connection (CLIENT KILL) while it lives on: it
        # subscribes again at once, so no reaper takes its matches, and its streams go on untouched.
        lease = rows_of(matches[0])[0].worker_lease
        dropped_at = time.monotonic()
        assert _kill_liveness_connection(redis_client, lease) == 1
        wait_for(lambda: _liveness_held(redis_client, lease), timeout=10, what="the signal re-established")
        settled = dropped_at + 2 * float(env.get("LISTENER_LIVENESS_GRACE_SECONDS", 0.5)) + 2.0
        wait_for(lambda: time.monotonic() > settled, timeout=30, what="the grace and reaper polls passing")
        assert _open_ids(matches) == before  # not reaped
        assert "liveness signal dropped" in doomed.output()
        killed_at = time.monotonic()
        doomed.kill()
        for m, g in zip(matches, games, strict=True):
            wait_for(
                lambda m=m, g=g: _moved(m, before) and server.connections(g.sr_id) == 1,
                timeout=120,
                interval=0.05,
                what="the standby streaming",
            )
        took = time.monotonic() - killed_at
    print(f"SIGKILL to both games streaming on the standby: {took:.2f} s")
    # Its liveness signal ended with it: taken over at once, not at the lease (8 s). 3 s: slack for
    # a loaded box (the figures: bench/recovery.py --feed).
    assert took < KILL_TAKEOVER_BOUND
    assert killed_monitor.max_open == 1  # a killed worker's sockets close with it: never two streams
    with OpenRowMonitor(m.id for m in matches) as pause_monitor:
        third = start_worker(env={**env, **host_a})
        before = _open_ids(matches)
        os.killpg(standby.proc.pid, signal.SIGSTOP)  # past every lease: "dead" to the others
        try:
            for m in matches:
                wait_for(lambda m=m: _moved(m, before), timeout=120, interval=0.2, what="the third streaming")
            paused = {str(r.id): r for m in matches for r in rows_of(m) if str(r.id) in before}
        finally:
            os.killpg(standby.proc.pid, signal.SIGCONT)
        # A dropped connection outside the resume window: the feed refuses the resume (410), the
        # run reconnects plainly and backfills from the play-by-play.
        for g in games:  # the resumed process lets go of its streams (it may no longer write)
            wait_for(lambda g=g: server.connections(g.sr_id) == 1, timeout=60, what="one stream per match")
        # The second SIGKILL of the streaming host's worker: back to host B.
        start_worker(env={**env, **host_b})
        before = _open_ids(matches)
        third.kill()
        for m, g in zip(matches, games, strict=True):
            wait_for(
                lambda m=m, g=g: _moved(m, before) and server.connections(g.sr_id) == 1,
                timeout=120,
                interval=0.2,
                what="host B streaming again",
            )
        server.resume_window_seconds = 0.0
        wait_for(lambda: _events_archived(lifecycle_env, games[0]) >= 60, timeout=60, what="60 events")
        assert server.drop_streams(games[0].sr_id) == 1
        for m in matches:
            wait_for(lambda m=m: _finished(m), timeout=GAME_DEADLINE, interval=0.5, what="the game over")
    assert rows_monitor.max_open == 1 and pause_monitor.max_open == 1
    assert "matches of dead listener workers" in standby.output()  # its reaper restarted them
    for g, m in zip(games, matches, strict=True):
        _assert_complete(lifecycle_env, server, g, m)
        runs = rows_of(m)
        assert [r.exit_code for r in runs] == [14, 14, 14, 13]  # killed, paused, killed, over
        assert runs[0].gaps == 0  # its dropped liveness connection cost its stream nothing
        # Each kill was seen from the liveness signal; the pause (its connection kept open) by the lease.
        assert [r.exit_reason for r in runs[:3]] == [WORKER_DIED, LEASE_EXPIRED, WORKER_DIED]
        assert [r.takeover_path for r in runs[1:]] == ["death_seen", "lease_lapsed", "death_seen"]
        # The paused run wrote nothing after it was taken over (its row is as the reaper closed it).
        was = paused[str(runs[1].id)]
        assert (runs[1].ended_at, runs[1].exit_code, runs[1].heartbeat_at) == (
            was.ended_at,
            was.exit_code,
            was.heartbeat_at,
        )
        assert len({r.worker_lease for r in runs}) == 4
        # The run after the pause missed seconds of events (the lease): its resume or backfill brought
        # them. A kill's takeover can be quicker than the feed's next event (0.16 s was seen), and so can
        # the refused resume's reconnect: those may recover 0 events; gaps_unrecovered == 0 below says
        # each of their gaps was settled by a resume or a backfill all the same.
        assert all(r.gaps >= 1 for r in runs[1:]) and runs[2].events_backfilled >= 1
        assert all(r.gaps_unrecovered == 0 for r in runs[1:])
        for run, successor in itertools.pairwise(runs):  # the paused run, resumed, above all: fenced
            assert written_after_successor(m, run, successor) == 0
    assert rows_of(matches[0])[3].gaps >= 2  # the takeover, then the refused resume
    _on_operators_box(subprocess_env, box, matches, games, server)


def test_drops_a_failing_play_by_play_an_operator_stop_and_a_deploy_lose_no_event(
    make_match, ctx, send_start, start_worker, feed, lifecycle_env, deploy, kick, tmp_path
):
    dropped, stopped, failing = games = _games(3)
    server = feed(games)
    matches = [make_match("mlb", sr_id=g.sr_id, status="inprogress") for g in games]
    by_game = dict(zip((g.sr_id for g in games), matches, strict=True))
    env = _env(server, LISTENER_BACKFILL_ATTEMPTS="3")
    host_a, host_b, _box = _hosts(tmp_path)
    with OpenRowMonitor(m.id for m in matches) as monitor:
        old_worker = start_worker(env={**env, **host_a})
        assert dispatch_now(ctx, send_start).enqueued == 3
        for g in games:
            wait_for(lambda g=g: _events_archived(lifecycle_env, g) >= 10, timeout=60, what="10 events")
        # A dropped connection, well inside the resume window: the feed replays what was missed.
        assert server.drop_streams(dropped.sr_id) == 1
        # A play-by-play that fails every try of the next backfill (three tries, below): that gap
        # stays unrecovered until a later backfill succeeds.
        server.pbp_faults.extend(["503", "notjson", "404"])
        # An operator stop, then a start: the new run backfills what was sent meanwhile.
        stop_match = by_game[stopped.sr_id]
        kick("listeners", "stop", str(stop_match.id), "--reason", "drill")
        wait_for(lambda: not open_rows(stop_match), timeout=30, what="the stopped run closed")
        held = _events_archived(lifecycle_env, stopped)
        wait_for(lambda: server.sessions[stopped.sr_id].position() > held + 12, timeout=30)
        # Outside the feed's resume window from here on: a new run cannot resume where the log
        # ends (it would, issue 37), so it asks the play-by-play, which fails every try.
        server.resume_window_seconds = 0.0
        kick("listeners", "start", str(stop_match.id), "--force", "--reason", "drill")
        wait_for(lambda: open_rows(stop_match), timeout=30, what="the stopped match started again")
        # Its backfill gives up (every try fails) before the deploy: a run handed over leaves its last
        # backfill, and its counts, to its successor.
        wait_for(
            lambda: [r.gaps_unrecovered for r in open_rows(stop_match)] == [1],
            timeout=60,
            what="the failing backfill given up, on the row",
        )
        # A deploy onto another host: a new listener worker up, the old one stopped gracefully.
        start_worker(env={**env, **host_b})
        before = _open_ids(matches)
        pid = old_worker.proc.pid
        deploy(f"kill -TERM {pid}; while ps -o stat= -p {pid} | grep -qv Z; do sleep 0.2; done")
        for m in matches:
            wait_for(
                lambda m=m: _moved(m, before), timeout=120, interval=0.2, what="the new worker streaming"
            )
        assert server.drop_streams(failing.sr_id) == 1  # a gap on the new worker too
        for m in matches:
            wait_for(lambda m=m: _finished(m), timeout=GAME_DEADLINE, interval=0.5, what="the game over")
    assert monitor.max_open == 1
    for g, m in zip(games, matches, strict=True):
        _assert_complete(lifecycle_env, server, g, m)
        assert all(r.gaps_unrecovered == 0 for r in rows_of(m)[-1:])
    assert sum(r.gaps for r in rows_of(by_game[dropped.sr_id])) >= 1
    assert server.pbp_faults == []  # every failing answer was met by a backfill
    stop_runs = rows_of(by_game[stopped.sr_id])
    assert [r.exit_code for r in stop_runs][:2] == [15, 14]  # stopped, then handed over at the deploy
    # The start after the stop met the failing play-by-play: its gap stayed unrecovered; the run
    # after the deploy recovered it (the play-by-play holds the whole game).
    assert stop_runs[1].gaps_unrecovered == 1 and stop_runs[1].events_backfilled == 0
    assert stop_runs[2].events_backfilled >= 12


def _tokens_go_back(match) -> int:
    """Events of the match's event log logged (in ``seq`` order) under an older fencing token than one
    already logged before them: a run recording after its successor had (never two recording streams)."""
    from models.db import database

    (n,) = database.execute_sql(
        "SELECT count(*) FROM (SELECT fence_token, max(fence_token) OVER (ORDER BY seq ROWS BETWEEN"
        " UNBOUNDED PRECEDING AND 1 PRECEDING) AS before FROM match_events WHERE match_id = %s) t"
        " WHERE fence_token < before",
        (str(match.id),),
    ).fetchone()
    return int(n)


def test_a_deploy_keeps_each_old_stream_open_until_its_successor_is_live_and_records_each_event_once(
    make_match, ctx, send_start, start_worker, feed, lifecycle_env, tmp_path
):
    events = 140
    games = mlb_games(2, events=events, interval=INTERVAL)  # about 35 s of stream
    server = feed(games)
    matches = [make_match("mlb", sr_id=g.sr_id, status="inprogress") for g in games]
    env = _env(server)
    host_a, host_b, _box = _hosts(tmp_path)
    with OpenRowMonitor(m.id for m in matches) as monitor:
        old_worker = start_worker(env={**env, **host_a})
        assert dispatch_now(ctx, send_start).enqueued == 2
        for g in games:
            wait_for(lambda g=g: _events_archived(lifecycle_env, g) >= 10, timeout=60, what="10 events")
        start_worker(env={**env, **host_b})
        before = _open_ids(matches)
        stopped_at = time.monotonic()
        old_worker.terminate(timeout=60)  # the deploy's graceful stop, the new worker already up
        for m in matches:
            wait_for(lambda m=m: _moved(m, before), timeout=60, interval=0.2, what="the new worker streaming")
        for m in matches:
            wait_for(lambda m=m: _finished(m), timeout=GAME_DEADLINE, interval=0.5, what="the game over")
    assert monitor.max_open == 1  # the old row closed (handed over) before the successor's opened
    out = old_worker.output()
    assert out.count("its successor waits: handed over") == 2 and "successor is live: stopping here" in out
    for g, m in zip(games, matches, strict=True):
        streams = [r for r in server.stream_history if r.sr_id == g.sr_id]
        old = [r for r in streams if r.opened < stopped_at]
        new = min((r for r in streams if r.opened >= stopped_at), key=lambda r: r.opened)
        assert new.first_live is not None and all(r.closed is not None for r in old)
        # The old stream was still open when the new one sent its first live byte: no second without
        # live data. It closed within the hand-off bound after (both open: overlapping by design).
        closed = max(r.closed for r in old)
        assert (
            new.first_live
            <= closed
            < new.first_live + float(REAL_WORKER_DEFAULTS.get("LISTENER_HANDOFF_SECONDS", 5))
        )
        runs = rows_of(m)
        assert [r.exit_code for r in runs] == [14, 13] and runs[1].takeover_path == "handoff"
        assert written_after_successor(m, runs[0], runs[1]) == 0  # the fence decided: one recorder
        assert _tokens_go_back(m) == 0
        messages = _archived(lifecycle_env, g)
        sent = [json.loads(line) for line in server.sessions[g.sr_id].lines]
        assert compare(messages, PlayByPlay(game={}, events=final_events(sent))).ok
        keys = Counter(message_key(x) for x in messages if message_key(x) is not None)
        assert max(keys.values()) == 1  # every event once, across the overlap
        questions = list(Question.select().where(Question.match == m.id))  # every event processed once
        assert len(questions) == (events + 3) // 4 == len({q.key for q in questions})
        assert all(q.status == "settled" for q in questions)
