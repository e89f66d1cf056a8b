"""Partitions real networks make: one test host cut from Redis, PostgreSQL, the feed or everything.

Two test hosts (tests/hosts.py: a network namespace each) run one real ``dramatiq`` listener
worker each, with the real MatchListener on srsim and default lease and heartbeat settings; the
dispatcher (the scheduler's role) runs on the host side. Games start on host h1, then h2's worker
comes up and h1 is cut from one service by packet drops inside its namespace (a black hole:
connections stay open, nothing passes) or by resets (a refusal). Streams are observed from the
feed's side (``SimServer.stream_history``: every stream connection's open and close, attributed
to the host whose proxy opened it; a stream counts as streaming while bytes can reach its host):
never two streams of one match at any instant, the takeover within issue 21's bound (10 s) after
the cut host stopped, every archive equal to srsim's game once the fault healed.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import re
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from config.errors import KickoffError
from config.settings import MatchListenerEnvironment
from harness.background import BackgroundLoop
from harness.hosts import HostNetwork, TestHost, most_concurrent
from lifecycle.heartbeat import FENCED, ROW_CLOSED_ELSEWHERE
from lifecycle.takeover import WORKER_DIED
from listener.events import message_key
from listener.play_by_play import PlayByPlay
from listener.verify import compare
from models.coordination import CoordinationStore
from models.event_log import messages_of
from srsim.pbp import final_events
from srsim.script import GameScript
from srsim.server import SimServer
from tests.lifecycle.conftest import REAL_WORKER_DEFAULTS
from tests.lifecycle.helpers import (
    OpenRowMonitor,
    dispatch_now,
    mlb_games,
    open_rows,
    rows_of,
    written_after_successor,
)
from tests.waiting import wait_for

pytestmark = [pytest.mark.partition, pytest.mark.e2e]

#: A game of about 48 s (the PostgreSQL cut: 58 s, its row deadline is 23 s): the fault, the
#: takeover and the heal fit in it.
EVENTS = 180
INTERVAL = 0.25
GAME_DEADLINE = 120.0
#: Issue 21's takeover bound: a dead listener's match streams again within 10 s (p99 of kills).
TAKEOVER_BOUND = 10.0
#: Redis is both the locks (REDIS_URL) and the Dramatiq broker (BROKER_URL) here.
REDIS = ("redis", "broker")


class Dispatcher(BackgroundLoop):
    """The scheduler's dispatch tick, on the host side, every 2 s (an outage only skips a tick)."""

    interval = 2.0

    def __init__(self, ctx: dict[str, Any], send: Callable[..., None]) -> None:
        super().__init__()
        self.ctx, self.send = ctx, send

    def step(self) -> None:
        with contextlib.suppress(KickoffError):
            dispatch_now(self.ctx, self.send)


@dataclass
class Fleet:
    """The games, their matches, the two hosts and what the test needs to start and observe them."""

    server: SimServer
    games: list[GameScript]
    matches: list[Any]
    network: HostNetwork
    env: dict[str, str]
    ctx: dict[str, Any]
    send: Callable[..., None]
    logs: Path
    data_dir: str
    workers: dict[str, Any] = field(default_factory=dict)

    @property
    def h1(self) -> TestHost:
        return self.network["h1"]

    @property
    def h2(self) -> TestHost:
        return self.network["h2"]

    def start_worker(self, host: TestHost) -> None:
        """A listener worker on ``host``, with a DATA_DIR of the host's own (no disk is shared)."""
        data_dir = self.logs / f"{host.name}-data"
        data_dir.mkdir(exist_ok=True)
        env = {**self.env, "DATA_DIR": str(data_dir)}
        self.workers[host.name] = host.start_worker(env, self.logs / f"{host.name}.log")

    def output(self, host: TestHost) -> str:
        return self.workers[host.name].output()

    # -- the feed's side -------------------------------------------------------------

    def streaming(self, sr_id: str, host: TestHost) -> bool:
        """Whether ``host`` has a stream of ``sr_id`` open now that bytes can reach."""
        now = time.monotonic()
        return any(
            p.sr_id == sr_id and p.host == host.name and p.end >= now - 0.001
            for p in self.network.streaming_periods(self.server.stream_history, now=now)
        )

    def last_end(self, sr_id: str, host: TestHost) -> float:
        """When ``host`` last stopped streaming ``sr_id`` (``time.monotonic()``)."""
        ends = [p.end for p in self._periods(sr_id) if p.host == host.name]
        return max(ends)

    def first_start_after(self, sr_id: str, host: TestHost, after: float) -> float:
        starts = [p.start for p in self._periods(sr_id) if p.host == host.name and p.start >= after]
        return min(starts)

    def first_live_after(self, sr_id: str, host: TestHost, after: float) -> float | None:
        """When ``host``'s first stream of ``sr_id`` opened after ``after`` got live data (None: not yet)."""
        records = [
            r
            for r in self.server.stream_history
            if r.sr_id == sr_id and r.opened >= after and self.network.host_of("feed", r.peer) is host
        ]
        return min(records, key=lambda r: r.opened).first_live if records else None

    def _periods(self, sr_id: str) -> list[Any]:
        return [p for p in self.network.streaming_periods(self.server.stream_history) if p.sr_id == sr_id]

    def story(self, sr_id: str, match_id: object, since: float, limit: int = 60) -> str:
        """What a failed bound prints: every stream of ``sr_id`` (host, seconds from ``since`` to its
        open, first live byte and close) and h1's log lines about ``match_id``, its liveness signal,
        lease and fence watch (the last ``limit``)."""

        def at(t: float | None) -> str:
            return "-" if t is None else f"{t - since:+.2f} s"

        streams = [
            f"stream on {getattr(self.network.host_of('feed', r.peer), 'name', None)}: opened {at(r.opened)},"
            f" first live {at(r.first_live)}, closed {at(r.closed)}"
            for r in self.server.stream_history
            if r.sr_id == sr_id
        ]
        words = (str(match_id), "liveness", "fence", "lease")
        lines = [line for line in self.output(self.h1).splitlines() if any(w in line for w in words)]
        return "\n".join([*streams, "h1's log:", *lines[-limit:]])

    def most_concurrent(self) -> dict[str, int]:
        return most_concurrent(self.network.streaming_periods(self.server.stream_history))

    # -- archives and rows ----------------------------------------------------------

    def archived(self, game: GameScript) -> list[dict[str, Any]]:
        """The game's messages in its match's event log (every host's runs)."""
        [match] = [m for m in self.matches if m.sr_id == game.sr_id]
        return messages_of(match.id)

    def assert_fenced(self) -> None:
        """No run logged a message after its successor's first one (fenced at the data)."""
        for m in self.matches:
            runs = rows_of(m)
            for run, successor in itertools.pairwise(runs):
                assert written_after_successor(m, run, successor) == 0, (m.id, run.id)

    def events_archived(self, game: GameScript) -> int:
        return sum(1 for m in self.archived(game) if "payload" in m)

    def wait_streaming_on(self, host: TestHost, *, events: int = 10, timeout: float = 60.0) -> None:
        for g in self.games:
            wait_for(
                lambda g=g: self.streaming(g.sr_id, host) and self.events_archived(g) >= events,
                timeout=timeout,
                what=f"{g.sr_id} streaming on {host.name}",
            )

    def wait_finished(self) -> None:
        for m in self.matches:
            wait_for(lambda m=m: _finished(m), timeout=GAME_DEADLINE, interval=0.5, what="the game over")

    def assert_complete(self, *, overlap_allowed: bool = False) -> None:
        """Every archive holds srsim's whole game, each distinct message once; never two streams (unless
        ``overlap_allowed``: a takeover the fence decides)."""
        for g in self.games:
            messages = self.archived(g)
            sent = [json.loads(line) for line in self.server.sessions[g.sr_id].lines]
            verdict = compare(messages, PlayByPlay(game={}, events=final_events(sent)))
            assert verdict.ok, (g.sr_id, verdict)
            keys = Counter(message_key(m) for m in messages if message_key(m) is not None)
            assert max(keys.values()) == 1, [k for k, n in keys.items() if n > 1]
        if not overlap_allowed:
            assert set(self.most_concurrent().values()) == {1}, self.most_concurrent()


def _finished(match: Any) -> bool:
    runs = rows_of(match)
    return bool(runs) and all(r.ended_at is not None for r in runs) and runs[-1].exit_code == 13


def _games(n: int, events: int) -> list[GameScript]:
    return mlb_games(n, events=events, interval=INTERVAL)


@pytest.fixture
def fleet(
    host_network: HostNetwork,
    make_match: Callable[..., Any],
    send_start: Callable[..., None],
    subprocess_env: dict[str, str],
    lifecycle_env: dict[str, str],
    redis_client: Any,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> Iterator[Callable[..., Fleet]]:
    """``fleet(events, **settings)``: two games on srsim, two test hosts; ``settings`` for every process."""
    servers: list[SimServer] = []

    def make(events: int = EVENTS, **settings: str) -> Fleet:
        games = _games(2, events)
        server = SimServer(games, heartbeat_seconds=1.0).start_background()
        servers.append(server)
        overrides = {**REAL_WORKER_DEFAULTS, **settings}
        for key, value in overrides.items():
            monkeypatch.setenv(key, value)
        host_side = MatchListenerEnvironment(_env_file=None)
        ctx = {
            "settings": host_side,
            "coordination": CoordinationStore.from_settings(host_side, client=redis_client),
        }
        env = {
            **subprocess_env,
            **lifecycle_env,
            **overrides,
            "LISTENER_BODY": "listener.match_listener:MatchListener",
            "SPORTRADAR_BASE_URL": server.base_url,
            "LISTENER_STATUS_RELOAD_HEARTBEATS": "3",
            "LISTENER_MAX_CONSECUTIVE_HEARTBEATS": "120",
        }
        host_network.add_host("h1")
        host_network.add_host("h2")
        matches = [make_match("mlb", sr_id=g.sr_id, status="inprogress") for g in games]
        return Fleet(
            server=server,
            games=games,
            matches=matches,
            network=host_network,
            env=env,
            ctx=ctx,
            send=send_start,
            logs=tmp_path,
            data_dir=lifecycle_env["DATA_DIR"],
        )

    yield make
    host_network.close()  # the workers first: none may stream after srsim stops
    for server in servers:
        server.stop()


def _started_on_h1_with_h2_standing_by(fleet: Fleet) -> None:
    fleet.start_worker(fleet.h1)  # the only listener worker up: the dispatcher's starts go to h1
    fleet.wait_streaming_on(fleet.h1)
    fleet.start_worker(fleet.h2)


# Refusals of Redis are cut in the suite's chaos run (tests/chaos/test_chaos_run.py: seed 62 refuses
# two hosts' Redis); this test keeps the black hole, the harder case for the lease, and the refusal's
# takeover by the liveness signal has a test of its own (below: its runs stop through their fence watch).
@pytest.mark.parametrize("kind", ["blackhole"])
def test_a_host_cut_from_redis_stops_streaming_and_the_other_host_takes_over_at_once(fleet, kind):
    fleet = fleet()
    with OpenRowMonitor(m.id for m in fleet.matches) as rows_monitor, Dispatcher(fleet.ctx, fleet.send):
        _started_on_h1_with_h2_standing_by(fleet)
        cut_at = time.monotonic()
        fleet.h1.cut(REDIS, kind=kind)
        fleet.wait_streaming_on(fleet.h2, events=0, timeout=60)
        fleet.h1.heal(REDIS)
        fleet.wait_finished()
    assert rows_monitor.max_open == 1
    fleet.assert_complete()
    for g, m in zip(fleet.games, fleet.matches, strict=True):
        stopped = fleet.last_end(g.sr_id, fleet.h1)
        took_over = fleet.first_start_after(g.sr_id, fleet.h2, stopped)
        print(
            f"redis {kind}: {g.sr_id[:8]} h1 stopped {stopped - cut_at:.1f} s after the cut,"
            f" h2 streaming {took_over - stopped:.1f} s later"
        )
        assert took_over - stopped <= TAKEOVER_BOUND
        first = rows_of(m)[0]
        assert first.exit_code in (14, 16) and first.exit_reason == "worker lease expired", first.exit_reason
        # A black hole keeps h1's liveness connection open in Redis's eyes: the lease decides.
        assert rows_of(m)[1].takeover_path == "lease_lapsed"
        assert all(r.gaps_unrecovered == 0 for r in rows_of(m)[1:])
    assert "worker lease expired" in fleet.output(fleet.h1)


#: A refused run's stream closes this long after its successor's first live byte at the latest: its
#: fence watch polls every 0.05 s (lifecycle.fence_watch), and the loaded box gets a lot of slack.
REFUSED_CLOSE_BOUND = 5.0


def test_a_host_refused_by_redis_closes_its_streams_once_the_other_host_takes_its_matches_over(fleet):
    """docs/reliability.md finding 10: a refusal drops h1's liveness signal at once, h2's reaper takes
    its matches over (``death_seen``), and h1's runs, which still stream, learn it from PostgreSQL
    (their fence watch, or whichever reader of that proof comes first) and close their streams soon after
    their successor's first live byte."""
    fleet = fleet()
    with OpenRowMonitor(m.id for m in fleet.matches) as rows_monitor, Dispatcher(fleet.ctx, fleet.send):
        _started_on_h1_with_h2_standing_by(fleet)
        coordination = fleet.ctx["coordination"]
        wait_for(
            lambda: len(coordination.client.keys(coordination.worker_lease_key("*"))) == 2,
            timeout=60,
            what="h2's worker up (its lease taken, its reaper watching)",
        )
        cut_at = time.monotonic()
        fleet.h1.cut(REDIS, kind="refuse")
        fleet.wait_streaming_on(fleet.h2, events=0, timeout=60)
        for g in fleet.games:
            wait_for(lambda g=g: not fleet.streaming(g.sr_id, fleet.h1), timeout=60, what="h1 stopped")
            wait_for(lambda g=g: fleet.first_live_after(g.sr_id, fleet.h2, cut_at) is not None, timeout=60)
        fleet.h1.heal(REDIS)
        fleet.wait_finished()
    assert rows_monitor.max_open == 1
    fleet.assert_complete(overlap_allowed=True)
    fleet.assert_fenced()  # nothing of h1's after its successor's first row
    for g, m in zip(fleet.games, fleet.matches, strict=True):
        closed = fleet.last_end(g.sr_id, fleet.h1)
        live = fleet.first_live_after(g.sr_id, fleet.h2, cut_at)
        assert live is not None
        print(
            f"redis refuse: {g.sr_id[:8]} h1 closed {closed - cut_at:.2f} s after the cut,"
            f" {closed - live:+.2f} s from h2's first live byte"
        )
        assert closed - live <= REFUSED_CLOSE_BOUND, fleet.story(g.sr_id, m.id, cut_at)
        first, successor = rows_of(m)[:2]
        assert first.exit_code == 14 and first.exit_reason == WORKER_DIED, first.exit_reason
        assert successor.takeover_path == "death_seen"
    # What closed them: PostgreSQL's proof that they were taken over. The fence watch polled it (it
    # starts once the signal is gone); which reader of that proof told each run first is a race on a
    # loaded box (a CI run had none told by the watch): the watch or the heartbeat's beat (both log
    # "listener must stop" with the row closed elsewhere or fenced), or the run's next write refused
    # by the fence; never a stop for Redis's silence (a start lock out of reach). tests/lifecycle/
    # test_fence_watch.py holds the watch to its part alone.
    output = fleet.output(fleet.h1)
    assert "liveness signal gone: checking the fencing" in output, output[-6000:]
    proof = "|".join(re.escape(reason) for reason in (ROW_CLOSED_ELSEWHERE, FENCED))
    for m in fleet.matches:
        told = re.search(
            rf"match {m.id}(: (taken over while this worker's liveness signal is gone: )?listener must stop: "
            rf"({proof})| event log write refused: )",
            output,
        )
        assert told is not None, output[-6000:]


def test_a_host_cut_from_postgresql_streams_until_its_row_deadline_then_stops(fleet):
    # Row deadline: stale - interval - grace = 30 - 5 - 2 = 23 s after the last heartbeat written
    # (at most one 5 s interval before the cut).
    stale, deadline = 30.0, 23.0
    fleet = fleet(EVENTS + 40, LISTENER_HEARTBEAT_STALE_SECONDS=str(stale))
    with OpenRowMonitor(m.id for m in fleet.matches) as rows_monitor, Dispatcher(fleet.ctx, fleet.send):
        _started_on_h1_with_h2_standing_by(fleet)
        cut_at = time.monotonic()
        fleet.h1.cut("database", kind="blackhole")
        for g in fleet.games:
            wait_for(
                lambda g=g: not fleet.streaming(g.sr_id, fleet.h1), timeout=stale + 10, what="h1 stopped"
            )
        healed_at = time.monotonic()
        fleet.h1.heal("database")
        for g in fleet.games:
            wait_for(
                lambda g=g: fleet.streaming(g.sr_id, fleet.h1) or fleet.streaming(g.sr_id, fleet.h2),
                timeout=60,
                what=f"{g.sr_id} streaming again",
            )
        fleet.wait_finished()
    assert rows_monitor.max_open == 1
    fleet.assert_complete()
    fleet.assert_fenced()  # the host cut from PostgreSQL: nothing of it after its successor's first row
    for g in fleet.games:
        h1_end = max(p.end for p in fleet._periods(g.sr_id) if p.host == "h1" and p.start < cut_at)
        again = min(p.start for p in fleet._periods(g.sr_id) if p.start > h1_end)
        print(
            f"postgres blackhole: {g.sr_id[:8]} h1 streamed {h1_end - cut_at:.1f} s into the cut,"
            f" streaming again {again - healed_at:.1f} s after the heal ({again - h1_end:.1f} s unstreamed)"
        )
        # Kept streaming into its row deadline, and stopped before its row could look stale; the
        # match streams again once that row is stale (the next dispatch abandons it), within the
        # takeover bound after that.
        assert deadline - 5 - 1 <= h1_end - cut_at <= stale
        assert again - h1_end <= (stale - deadline) + TAKEOVER_BOUND


def test_a_host_cut_from_the_feed_keeps_its_matches_and_recovers_the_cut_when_healed(fleet):
    fleet = fleet()
    with OpenRowMonitor(m.id for m in fleet.matches) as rows_monitor, Dispatcher(fleet.ctx, fleet.send):
        _started_on_h1_with_h2_standing_by(fleet)
        fleet.h1.cut("feed", kind="blackhole")
        held = {g.sr_id: fleet.events_archived(g) for g in fleet.games}
        wait_for(
            lambda: all(fleet.server.sessions[s].position() > n + 20 for s, n in held.items()),
            timeout=30,
            what="20 events sent during the cut",
        )
        healed_at = time.monotonic()
        fleet.h1.heal("feed")
        fleet.wait_streaming_on(fleet.h1, events=0, timeout=30)
        fleet.wait_finished()
    assert rows_monitor.max_open == 1
    fleet.assert_complete()
    for g, m in zip(fleet.games, fleet.matches, strict=True):
        [run] = rows_of(m)  # never taken over: its host kept its lease and its lock
        # The silence is a gap, and nothing of it is left unrecovered (assert_complete: every event
        # once). Who brings the held-back events is a race: the play-by-play backfill the silence
        # asks for, or the connection itself, whose segments TCP retransmits once the black hole
        # heals; since writes are pipelined the stream usually wins (events_backfilled 0).
        assert run.gaps >= 1 and run.gaps_unrecovered == 0
        again = fleet.first_start_after(g.sr_id, fleet.h1, healed_at)
        print(f"feed blackhole: {g.sr_id[:8]} streaming again {again - healed_at:.1f} s after the heal")
        assert again - healed_at <= TAKEOVER_BOUND
    assert not any(p.host == "h2" for p in fleet.network.streaming_periods(fleet.server.stream_history))


def test_a_host_cut_from_the_feed_past_the_bound_gives_its_matches_to_the_other_host(fleet):
    """Its lease is renewed throughout (Redis answers), so no reaper takes its matches: each run sees
    the silence, reconnects, and gives its match back once the feed stayed lost for
    LISTENER_FEED_LOST_SECONDS (12, ``feed lost``); h1's worker takes no start while its feed probe
    fails (lifecycle.feed_reach), so h2 streams them (docs/reliability.md finding 5)."""
    fleet = fleet()
    with OpenRowMonitor(m.id for m in fleet.matches) as rows_monitor, Dispatcher(fleet.ctx, fleet.send):
        _started_on_h1_with_h2_standing_by(fleet)
        cut_at = time.monotonic()
        fleet.h1.cut("feed", kind="blackhole")
        fleet.wait_streaming_on(fleet.h2, events=0, timeout=60)
        took_over_at = time.monotonic()
        fleet.h1.heal("feed")
        fleet.wait_finished()
    assert rows_monitor.max_open == 1
    fleet.assert_complete()
    for m in fleet.matches:
        first = rows_of(m)[0]
        assert first.exit_code == 12 and first.exit_reason.startswith("feed lost"), first.exit_reason
    print(f"feed blackhole past the bound: every match on h2 {took_over_at - cut_at:.1f} s after the cut")


def test_a_host_cut_from_everything_is_taken_over_and_writes_nothing_after_the_heal(fleet):
    fleet = fleet()
    with OpenRowMonitor(m.id for m in fleet.matches) as rows_monitor, Dispatcher(fleet.ctx, fleet.send):
        _started_on_h1_with_h2_standing_by(fleet)
        cut_at = time.monotonic()
        fleet.h1.cut("all", kind="blackhole")
        fleet.wait_streaming_on(fleet.h2, events=0, timeout=60)
        took_over_at = time.monotonic()
        fleet.h1.heal("all")
        fleet.wait_finished()
    assert rows_monitor.max_open == 1
    fleet.assert_complete()
    fleet.assert_fenced()
    print(f"all blackhole: every match streaming on h2 {took_over_at - cut_at:.1f} s after the cut")
    lease = float(REAL_WORKER_DEFAULTS["LISTENER_WORKER_LEASE_SECONDS"])
    assert took_over_at - cut_at <= lease + TAKEOVER_BOUND
    for m in fleet.matches:
        first, *later = rows_of(m)
        assert first.exit_code == 14 and first.exit_reason == "worker lease expired"  # reaped by h2
        assert later and all(r.gaps_unrecovered == 0 for r in later)
        assert not open_rows(m)
