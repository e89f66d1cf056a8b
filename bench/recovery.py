"""Benchmark: listener takeover, measured from srsim's side: a worker SIGKILLed mid-game, a graceful
(SIGTERM) hand-off, and the events the listeners recorded across them.

Run: ``.venv/bin/python bench/recovery.py [--feed] [--kills 20] [--pauses 0] [--handoffs 5] [--matches 3]
[--stale-kills 0] [--compare-backfill] [--json] [--save]`` (about ten minutes with the defaults).
``--feed``: issue 37's run (20 kills, 5 pauses, 5 hand-offs of 3 matches), its figures printed beside
the lease path's before the liveness signal (kill to live data p50 7.5 s, p99 8.9 s). srsim serves one mlb
game per match at 2 events/s (a stream heartbeat every 5 s), and the real MatchListener body
streams each game inside real ``dramatiq`` listener workers at default settings (heartbeat 30 s,
stale threshold 180 s, worker lease 8 s, reaper poll 0.5 s, hand-off bound 5 s) on a throw-away
database, Redis key prefix and Dramatiq namespace; two listener workers are always up, the
scheduler dispatches every minute (and once at the start). The fresh key prefix is a new Redis
data epoch, which the reaper does not judge for a lease and a renewal (lifecycle.lease): the first
kill waits until it is older, as a production Redis's is.

Every figure comes from srsim's record of each stream connection (``/_srsim/connections``:
opened, closed, and when live data, a live event or a heartbeat, was first and last sent on it):

* Kills: each kill SIGKILLs the worker running a match; per match the worker ran, its seconds are
  from the kill to the match's next live byte on a new connection (the goals' figures, over every
  kill and match: ``kill_to_live_per_match_s``; the last match of each kill, ``kill_to_live_s``, is
  printed too); then a replacement starts, and the next kill comes once it has been up
  ``--standby-up`` seconds (5: a fleet's standby was up long before a worker dies; 0: a kill right
  after the replacement booted, a deploy racing a crash). The worker's liveness signal ends with it
  (lifecycle.liveness). Goals (issue 37): p50 <= 0.5 s, p99 <= 1.5 s. Each match's takeover is cut
  into segments (bench._takeover ``takeover_segments``: the death seen and its rows closed, the
  successor's row written, its connection opened, the feed's next live event), and
  ``kill_to_connected_s`` is the kill to the new connection (a resumed one gets the missed events at
  once, as replays: srsim counts them as no live data, so the figures wait for the feed's next event
  too, 0.25 s on average at 2 events/s).
* ``--pauses``: each SIGSTOPs the worker running a match until every match it ran streams on a new
  connection (its lease lapses: its connections stay open), then SIGCONTs it (it fences itself and
  lives on, without a replacement). Its seconds: from the SIGSTOP to that live byte. Goal (issue
  37): p99 <= 12 s. srsim keeps sending on a paused worker's connections (into its socket buffers),
  so a pause's "gap" is no overlap of recording streams: the fencing token decides (not counted).
* Hand-offs: each SIGTERMs the worker running a match while the other one is up; per match, the
  seconds without live data are the new connection's first live byte minus the old connection's
  last one, none when the old connection was still open at the new one's first live byte (the old
  run keeps its stream until then, lifecycle.runtime): then the gap is negative, the overlap of the
  two. Goals: at most 1 s (docs/lifecycle.md), p99 <= 0 s (issue 37: a deploy leaves no second
  without live data). Two connections live at once after a kill fail the run (``overlaps``).
* Recording overlaps: events of the matches' event logs logged under an older fencing token after
  one under a newer token (two runs recording at once; the fence refuses that). Goal: 0.
* Events lost: the event ids srsim sent from the moment every match first streamed to the moment
  every match streamed again after the last stop, minus those in the match's archive
  ``{DATA_DIR}/listener/mlb/{shortcode}.json`` (waited for up to a minute, so a backfill can fill
  it). Goal (issue 21): 0.
* ``--stale-kills``: kills with leases too long to lapse (what kickoff did before worker leases:
  the scheduler's one-minute sweep and dispatch recover); figures only.
* ``--compare-backfill``: the kills once more with LISTENER_BACKFILL=false, fresh matches and
  games: the events lost per kill without the play-by-play backfill (figures only).
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._setup import ADMIN_DB, percentile
from bench._srsim import start_sim, write_games
from bench._takeover import (
    SEGMENTS,
    Takeover,
    events_lost,
    handoff_gap,
    live_since,
    new_connections,
    old_streams_end,
    recording_overlaps,
    sim_sessions,
    takeover_segments,
)
from bench._verdict import Bench, Goal
from cli.processes import ChildProcess, dramatiq_worker_argv

BENCH = Bench(
    "recovery",
    __doc__,
    [
        Goal("kill_p50_s", 0.5, at_most=True, unit="s", source="issue 37: kill to live data again, p50"),
        Goal("kill_p99_s", 1.5, at_most=True, unit="s", source="issue 37: kill to live data again, p99"),
        Goal("pause_p99_s", 12, at_most=True, unit="s", source="issue 37: SIGSTOP past the lease, p99"),
        Goal("handoff_gap_p99_s", 0, at_most=True, unit="s", source="issue 37: a deploy without live data"),
        Goal(
            "handoff_gap_max_s",
            1,
            at_most=True,
            unit="s",
            source="docs/lifecycle.md: hand-off without live data",
        ),
        Goal(
            "overlaps",
            0,
            at_most=True,
            unit="takeovers",
            source="issue 36: overlap after a kill is a failure",
        ),
        Goal(
            "recording_overlaps",
            0,
            at_most=True,
            unit="events",
            source="issue 37: never two recording streams (the event log's fencing tokens)",
        ),
        Goal("events_lost", 0, at_most=True, unit="events", source="issue 21: every event recorded"),
    ],
)
TAG = uuid.uuid4().hex[:8]
BIN = Path(sys.executable).parent
ENV = {
    "DATABASE_URL": f"{ADMIN_DB}/kickoff_bench_{TAG}",
    "REDIS_KEY_PREFIX": f"kickoffbench:{TAG}:",
    "BROKER_NAMESPACE": f"kickoffbench-{TAG}",
    "LISTENER_BODY": "listener.match_listener:MatchListener",
    "APP_ENV": "staging",  # the scheduler dispatches live matches and sweeps every minute
}
#: Kill to live data again on the lease path, before the liveness signal (bench/results, issue 37).
BEFORE = {"kill_p50_s": 7.5, "kill_p99_s": 8.9}
#: Seconds between two events of a game (2 events/s) and between two stream heartbeats.
EVENT_INTERVAL = 0.5
STREAM_HEARTBEAT = 5.0


def start_proc(cmd: list[str], log: Path, env: dict[str, str], *, ready: bool = False) -> ChildProcess:
    """A kickoff process (worker or scheduler) in its own session; ``ready``: wait for the worker."""
    child = ChildProcess(cmd, env=env, log=log)
    if ready and not child.wait_for_output("ready for action", timeout=120):
        child.close()
        raise RuntimeError(f"worker did not start: {log}")
    return child


def stop_gracefully(child: ChildProcess) -> None:
    """Graceful stop: a listener worker hands its matches over and records exit 14."""
    try:
        child.terminate(timeout=60)
    except subprocess.TimeoutExpired:
        child.kill(timeout=30)
    child.close()


#: When each listener worker (by pid) said it was ready, ``time.monotonic()``.
READY_AT: dict[int, float] = {}


def listener_worker(env: dict[str, str], log: Path) -> ChildProcess:
    cmd = dramatiq_worker_argv("match_listeners", threads=8)
    child = start_proc(cmd, log, env, ready=True)
    READY_AT[child.proc.pid] = time.monotonic()
    return child


def wait_standbys_up(workers: list[ChildProcess], victim: ChildProcess, seconds: float) -> None:
    """Wait until every worker but ``victim`` has been ready for ``seconds``."""
    others = [READY_AT.get(w.proc.pid, 0.0) for w in workers if w is not victim]
    wait = max((at + seconds for at in others), default=0.0) - time.monotonic()
    if wait > 0:
        time.sleep(wait)


def _query(sql: str, params: tuple = ()) -> list[tuple]:
    from models.db import database

    try:
        return database.execute_sql(sql, params).fetchall()
    finally:
        database.close()


def open_rows() -> dict[str, tuple[str, int]]:
    """match id -> (open row id, pid of the process running it)."""
    rows = _query("SELECT match_id::text, id::text, pid FROM match_listener_records WHERE ended_at IS NULL")
    return {m: (r, pid) for m, r, pid in rows}


def wait_epoch_judged() -> None:
    """Wait until the reaper may judge leases: this run's fresh key prefix starts a new Redis data
    epoch, which a production Redis left behind long ago (the reaper waits a lease and a renewal)."""
    from config.settings import load_listener_settings
    from models.coordination import CoordinationStore

    settings = load_listener_settings(_env_file=None)
    coordination = CoordinationStore.from_settings(settings)
    window = settings.listener_worker_lease_seconds * 1.25 + 1
    while True:
        age = coordination.locks.live_worker_leases([])[1]
        if age is not None and age >= window + 1:
            return
        time.sleep(0.5)


def host_of(pid: int, workers: list[ChildProcess]) -> ChildProcess:
    pgid = os.getpgid(pid)
    return next(w for w in workers if w.proc.pid == pgid)


def wait_rows(match_ids: list[str], *, timeout: float) -> dict[str, tuple[str, int]]:
    """Wait until every match has an open lifecycle row; the rows."""
    deadline = time.monotonic() + timeout
    while True:
        rows = open_rows()
        if all(m in rows for m in match_ids):
            return rows
        if time.monotonic() > deadline:
            raise RuntimeError(f"matches without an open row after {timeout:g} s")
        time.sleep(0.1)


@dataclass
class Games:
    """The matches of a scenario: internal id -> sr_id, and srsim's URL."""

    sr_of: dict[str, str]
    sim_url: str

    @property
    def ids(self) -> list[str]:
        return list(self.sr_of)


def stop_loop(
    stops: int,
    games: Games,
    env: dict[str, str],
    logdir: Path,
    *,
    timeout: float,
    graceful: bool = False,
    workers: list,
    pause: bool = False,
    standby_up: float = 0.0,
) -> list[Takeover]:
    """Stop the host of a match ``stops`` times (SIGKILL, SIGTERM with ``graceful``, SIGSTOP then
    SIGCONT with ``pause``), each time timing the takeover from srsim's side, then starting a
    replacement worker (a paused one lives on)."""
    out: list[Takeover] = []
    kind = "pause" if pause else "sigterm" if graceful else "kill"
    for k in range(stops):
        rows = wait_rows(games.ids, timeout=timeout)
        victim = host_of(rows[games.ids[k % len(games.ids)]][1], workers)
        victims = [games.sr_of[m] for m in games.ids if host_of(rows[m][1], workers) is victim]
        wait_standbys_up(workers, victim, standby_up)
        stopped_at, stopped_wall = time.monotonic(), time.time()
        if pause:
            os.killpg(victim.proc.pid, signal.SIGSTOP)
        elif graceful:
            os.kill(victim.proc.pid, signal.SIGTERM)  # the master forwards it
        else:
            victim.kill(timeout=30)
        try:
            first = live_since(games.sim_url, victims, stopped_at, timeout=timeout)
        finally:
            if pause:
                os.killpg(victim.proc.pid, signal.SIGCONT)
        ends = old_streams_end(games.sim_url, victims, stopped_at, timeout=60)
        if pause:
            pass  # it lives on: it fenced its runs and takes new starts
        elif graceful:
            stop_gracefully(victim)  # already exiting: reaps it
        else:
            victim.close()
        if not pause:
            workers.remove(victim)
        took = Takeover(
            kind,
            len(victims),
            max(first.values()) - stopped_at,
            [
                handoff_gap(first[sr], *ends[sr]) if graceful else first[sr] - ends[sr][0]
                for sr in victims
                if sr in ends
            ],
            [first[sr] - stopped_at for sr in victims],
        )
        if kind == "kill":
            took.segments = kill_segments(games, rows, victims, stopped_at, stopped_wall)
        out.append(took)
        print(
            f"  {kind} {k + 1}/{stops}: {took.matches} matches live again after {took.seconds:.2f} s "
            f"(without live data: {', '.join(f'{g:.2f}' for g in took.gaps)} s)"
            + "".join(
                f"\n    {' + '.join(f'{name} {seg[name]:.2f}' for name in SEGMENTS)} s"
                for seg in took.segments
            ),
            flush=True,
        )
        if not pause:
            workers.append(listener_worker(env, logdir / f"w{TAG}-{time.monotonic_ns()}.log"))
    return out


def kill_segments(
    games: Games, before: dict[str, tuple[str, int]], victims: list[str], killed_at: float, killed_wall: float
) -> list[dict[str, float]]:
    """Per match of a kill: its takeover cut into segments (bench._takeover ``takeover_segments``), from
    the rows it had before the kill and after, and srsim's new connection."""
    conns = new_connections(games.sim_url, victims, killed_at)
    by_sr = {sr: m for m, sr in games.sr_of.items()}
    ids = [by_sr[sr] for sr in victims]
    found = _query(
        "SELECT id::text, match_id::text, extract(epoch FROM created_at)::float8,"
        " extract(epoch FROM ended_at)::float8 FROM match_listener_records WHERE match_id = ANY(%s::uuid[])",
        (ids,),
    )
    out = []
    for sr in victims:
        match_id = by_sr[sr]
        old = next((end for rid, m, _, end in found if rid == before[match_id][0]), None)
        created = [at for _, m, at, _ in found if m == match_id and at >= killed_wall]
        if old is None or not created or sr not in conns:
            continue
        out.append(
            takeover_segments(
                killed_at=killed_at,
                killed_wall=killed_wall,
                old_closed_wall=old,
                new_created_wall=min(created),
                connection=conns[sr],
            )
        )
    return out


#: ``kickoff``'s exit status when a service did not answer (config.errors: unavailable, retry).
EXIT_UNAVAILABLE = 5


def enqueue_dispatch(env: dict[str, str], *, attempts: int = 10) -> None:
    """``kickoff enqueue dispatch_upcoming_match_listeners``, again while a service does not answer (the
    shared PostgreSQL of a loaded box at its connection limit), a second apart."""
    for attempt in range(attempts):
        done = subprocess.run(
            [str(BIN / "kickoff"), "enqueue", "dispatch_upcoming_match_listeners"],
            env=env,
            capture_output=True,
            timeout=60,
        )
        if done.returncode != EXIT_UNAVAILABLE or attempt == attempts - 1:
            done.check_returncode()
            return
        time.sleep(1)


def create_matches(n: int, league_name: str) -> dict[str, str]:
    """``n`` live matches of ``league_name``: internal id -> sr_id."""
    from config.clock import utcnow
    from models.db import database
    from models.league import League
    from models.match import Match

    league, _ = League.get_or_create(name=league_name)
    out = {}
    for _ in range(n):
        sr_id = f"sr:match:{uuid.uuid4()}"
        match = Match.create(league=league, sr_id=sr_id, status="inprogress", scheduled=utcnow())
        out[str(match.id)] = sr_id
    database.close()
    return out


def stop_matches(match_ids: list[str]) -> None:
    """Operator stops (a scenario's end): the listeners end, no start of them runs any more."""
    from config.settings import load_listener_settings
    from lifecycle.cleanup import stop_match_listener
    from models.coordination import CoordinationStore
    from models.db import database

    settings = load_listener_settings(_env_file=None)
    coordination = CoordinationStore.from_settings(settings)
    try:
        for match_id in match_ids:
            stop_match_listener(match_id, settings=settings, coordination=coordination, stopped_by="bench")
    finally:
        database.close()


def scenario(
    *,
    kills: int,
    handoffs: int,
    stale_kills: int,
    matches: int,
    env: dict[str, str],
    pauses: int = 0,
    logdir: Path,
    name: str,
    standby_up: float = 0.0,
) -> dict[str, object]:
    """Matches on srsim with the real body, two listener workers, the stops; figures (takeovers,
    events lost)."""
    games_by_id = create_matches(matches, "mlb")
    seconds = 120.0 + (kills + handoffs + pauses) * 40.0 + stale_kills * 300.0
    script = write_games(
        logdir / f"games-{name}.json",
        list(games_by_id.values()),
        start_after=0.0,
        event_interval=EVENT_INTERVAL,
        event_count=int(seconds / EVENT_INTERVAL),
    )
    sim, sim_url = start_sim(script, heartbeat_seconds=STREAM_HEARTBEAT)
    games = Games(games_by_id, sim_url)
    senv = {**env, "SPORTRADAR_BASE_URL": sim_url, "DATA_DIR": str(logdir / f"data-{name}")}
    workers = [listener_worker(senv, logdir / f"w{TAG}-{time.monotonic_ns()}.log") for _ in range(2)]
    try:
        began = time.monotonic()
        enqueue_dispatch(senv)
        live_since(sim_url, list(games_by_id.values()), 0.0, timeout=180)
        print(
            f"{name}: every match streams ({time.monotonic() - began:.1f} s after the dispatch)", flush=True
        )
        first = {sr: s["position"] for sr, s in sim_sessions(sim_url).items()}
        wait_epoch_judged()
        takeovers = stop_loop(
            kills, games, senv, logdir, timeout=300, graceful=False, workers=workers, standby_up=standby_up
        )
        takeovers += stop_loop(pauses, games, senv, logdir, timeout=120, pause=True, workers=workers)
        takeovers += stop_loop(handoffs, games, senv, logdir, timeout=120, graceful=True, workers=workers)
        stale: list[Takeover] = []
        if stale_kills:
            stale_env = {**senv, "LISTENER_WORKER_LEASE_SECONDS": "86400"}  # never lapses: the old path
            print("stale path: leases that never lapse; the scheduler's sweep and dispatch each minute")
            for w in workers:
                stop_gracefully(w)
            workers[:] = [
                listener_worker(stale_env, logdir / f"w{TAG}-{time.monotonic_ns()}.log") for _ in range(2)
            ]
            stale = stop_loop(
                stale_kills, games, stale_env, logdir, timeout=900, graceful=False, workers=workers
            )
        end = {sr: s["position"] for sr, s in sim_sessions(sim_url).items()}
        lost, sent = events_lost(script, Path(senv["DATA_DIR"]), first, end)
        recorded_twice = recording_overlaps(games.ids)
        stop_matches(games.ids)
    finally:
        for w in workers:
            stop_gracefully(w)
        sim.kill()
        sim.wait(10)
    return {
        "takeovers": takeovers,
        "stale": stale,
        "events_lost": lost,
        "events_sent": sent,
        "recording_overlaps": recorded_twice,
    }


def _summary(values: list[float]) -> dict[str, float] | None:
    if not values:
        return None
    return {
        "p50": percentile(values, 50),
        "p99": percentile(values, 99),
        "max": max(values),
        "n": len(values),
    }


def figures_of(result: dict[str, object], without: dict[str, object] | None) -> dict[str, object]:
    takeovers: list[Takeover] = result["takeovers"]  # type: ignore[assignment]
    kills = [t.seconds for t in takeovers if t.kind == "kill"]
    # The goals' sample: every match of every kill (the last match of a kill is ``kill_to_live_s``).
    each = [e for t in takeovers if t.kind == "kill" for e in t.each]
    segments = [seg for t in takeovers if t.kind == "kill" for seg in t.segments]
    pauses = [t.seconds for t in takeovers if t.kind == "pause"]
    handoffs = [t for t in takeovers if t.kind == "sigterm"]
    gaps = [g for t in handoffs for g in t.gaps]
    stale = [t.seconds for t in result["stale"]]  # type: ignore[union-attr]
    figures: dict[str, object] = {
        "kill_to_live_s": _summary(kills),
        # Each match on its own (the figure above is the last of a kill's matches to stream again).
        "kill_to_live_per_match_s": _summary(each),
        "kill_to_connected_s": _summary(
            [seg["death_seen"] + seg["restarted"] + seg["connected"] for seg in segments]
        ),
        # Where each match's takeover after a kill went (bench._takeover.takeover_segments).
        "kill_segments_s": {name: _summary([seg[name] for seg in segments]) for name in SEGMENTS},
        "kill_p50_s": percentile(each, 50) if each else None,
        "kill_p99_s": percentile(each, 99) if each else None,
        "pause_to_live_s": _summary(pauses),
        "pause_p99_s": percentile(pauses, 99) if pauses else None,
        "handoff_gap_p99_s": percentile(gaps, 99) if gaps else None,
        "before": BEFORE,
        "kill_gaps_s": _summary([g for t in takeovers if t.kind == "kill" for g in t.gaps]),
        "sigterm_to_live_s": _summary([t.seconds for t in handoffs]),
        "handoff_gaps_s": _summary(gaps),
        "handoff_gap_max_s": max(gaps) if gaps else None,
        # After a kill, two connections live at once would be two streams; a paused worker's are sent to
        # while it sleeps, and a hand-off overlaps by design: the event log's tokens say who recorded.
        "overlaps": sum(t.overlaps for t in [*takeovers, *result["stale"]] if t.kind == "kill"),  # type: ignore[misc]
        "recording_overlaps": result["recording_overlaps"],
        "events_lost": result["events_lost"],
        "events_sent": result["events_sent"],
        "events_lost_per_kill": result["events_lost"] / max(1, len(kills)),  # type: ignore[operator]
        "stale_kill_to_live_s": _summary(stale),
    }
    if stale and kills:
        figures["ratio_stale_lease_p50"] = percentile(stale, 50) / percentile(kills, 50)
    if without is not None:
        plain = [t.seconds for t in without["takeovers"]]  # type: ignore[union-attr]
        figures["without_backfill"] = {
            "kill_to_live_s": _summary(plain),
            "events_lost": without["events_lost"],
            "events_lost_per_kill": without["events_lost"] / max(1, len(plain)),  # type: ignore[operator]
        }
    return figures


def print_figures(f: dict[str, object]) -> None:
    def line(name: str, s: dict[str, float] | None) -> None:
        if s is not None:
            print(f"{name}: p50 {s['p50']:.2f} s, p99 {s['p99']:.2f} s, max {s['max']:.2f} s over {s['n']}")

    line("kill to each match's next live byte on a new connection", f["kill_to_live_per_match_s"])  # type: ignore[arg-type]
    line("  the last match of each kill", f["kill_to_live_s"])  # type: ignore[arg-type]
    line("  kill to each match's new connection (its replay sent at once)", f["kill_to_connected_s"])  # type: ignore[arg-type]
    for name, summary in f["kill_segments_s"].items():  # type: ignore[union-attr]
        line(f"    of which {name}", summary)
    before = f["before"]
    print(
        f"  before the liveness signal (the lease path): p50 {before['kill_p50_s']:.1f} s, "
        f"p99 {before['kill_p99_s']:.1f} s"
    )  # type: ignore[index]
    line("SIGSTOP past the lease to the next live byte on a new connection", f["pause_to_live_s"])  # type: ignore[arg-type]
    line("SIGTERM to the next live byte on a new connection", f["sigterm_to_live_s"])  # type: ignore[arg-type]
    line("hand-off, seconds without live data per match", f["handoff_gaps_s"])  # type: ignore[arg-type]
    line("stale path, kill to live data again", f["stale_kill_to_live_s"])  # type: ignore[arg-type]
    print(f"overlaps after a kill (two connections of a match sending live data at once): {f['overlaps']}")
    print(
        "recording overlaps (events logged under an older fencing token after a newer one): "
        f"{f['recording_overlaps']}"
    )
    print(
        f"events lost: {f['events_lost']} of {f['events_sent']} sent "
        f"({f['events_lost_per_kill']:.1f} per kill)"
    )
    if "without_backfill" in f:
        w = f["without_backfill"]
        print(
            f"LISTENER_BACKFILL=false: events lost {w['events_lost']} "
            f"({w['events_lost_per_kill']:.1f} per kill)"
        )  # type: ignore[index]


def main() -> int:
    parser = BENCH.parser()
    parser.add_argument(
        "--feed",
        action="store_true",
        help="issue 37's run: 20 kills, 5 pauses, 5 hand-offs of 3 matches (unless given), beside the"
        " figures before the liveness signal",
    )
    parser.add_argument("--kills", type=int, default=None, help="SIGKILLs timed (default 20)")
    parser.add_argument(
        "--pauses", type=int, default=None, help="SIGSTOPs past the lease timed (default 0; --feed 5)"
    )
    parser.add_argument("--handoffs", type=int, default=5, help="graceful SIGTERM hand-offs timed (0: skip)")
    parser.add_argument("--matches", type=int, default=3, help="live matches (games on srsim)")
    parser.add_argument(
        "--standby-up",
        type=float,
        default=5.0,
        help="seconds a kill's standby has been up before the kill (0: right after the replacement booted)",
    )
    parser.add_argument("--stale-kills", type=int, default=0, help="kills timed on the stale path (0: skip)")
    parser.add_argument(
        "--compare-backfill",
        action="store_true",
        help="the kills once more with LISTENER_BACKFILL=false: events lost without the backfill",
    )
    args = parser.parse_args()
    args.kills = 20 if args.kills is None else args.kills
    args.pauses = (5 if args.feed else 0) if args.pauses is None else args.pauses
    if args.matches < 1 or args.pauses < 0:
        parser.error("--matches must be at least 1; --pauses at least 0")
    if args.matches < 1 or args.kills < 0 or args.handoffs < 0 or args.stale_kills < 0:
        parser.error("--matches must be at least 1; --kills, --handoffs, --stale-kills at least 0")
    with BENCH.output(args):
        figures = run(args)
        skipped = [
            name
            for name, off in (
                ("kill_p50_s", not args.kills),
                ("kill_p99_s", not args.kills),
                ("pause_p99_s", not args.pauses),
                ("handoff_gap_max_s", not args.handoffs),
                ("handoff_gap_p99_s", not args.handoffs),
            )
            if off
        ]
        return BENCH.finish(args, figures, skipped=skipped)


def run(args: argparse.Namespace) -> dict[str, object]:
    os.environ.update(ENV)
    env = {**os.environ}

    from config.settings import load_listener_settings
    from models.coordination import connect_redis
    from models.db import init_database
    from models.migrate import drop_database, migrate

    settings = load_listener_settings(_env_file=None)
    migrate(settings.database_url)
    init_database(settings.database_url)
    logdir = Path(f"/tmp/kickoff-bench-recovery-{TAG}")
    logdir.mkdir(parents=True, exist_ok=True)
    scheduler = default_worker = None
    s = settings
    print(
        f"ran: --kills {args.kills} --pauses {args.pauses} --handoffs {args.handoffs} "
        f"--matches {args.matches} --standby-up {args.standby_up:g} "
        f"--stale-kills {args.stale_kills}; lease {s.listener_worker_lease_seconds:g} s (renewed every "
        f"{s.listener_worker_lease_seconds / 4:g} s), reaper poll {s.listener_reaper_poll_seconds:g} s, "
        f"liveness grace {s.listener_liveness_grace_seconds:g} s, "
        f"hand-off bound {s.listener_handoff_seconds:g} s, "
        f"heartbeat {s.listener_heartbeat_interval_seconds:g} s, "
        f"stale {s.listener_heartbeat_stale_seconds:g} s; logs in {logdir}",
        flush=True,
    )
    try:
        # Matches start the way production starts them: the scheduler's dispatch each minute.
        default_worker = start_proc(
            dramatiq_worker_argv("default", processes=None), logdir / "default.log", env, ready=True
        )
        scheduler = start_proc([str(BIN / "kickoff"), "scheduler"], logdir / "scheduler.log", env)
        result = scenario(
            kills=args.kills,
            handoffs=args.handoffs,
            stale_kills=args.stale_kills,
            matches=args.matches,
            env=env,
            logdir=logdir,
            name="default",
            pauses=args.pauses,
            standby_up=args.standby_up,
        )
        without = None
        if args.compare_backfill:
            without = scenario(
                kills=args.kills,
                handoffs=0,
                stale_kills=0,
                matches=args.matches,
                env={**env, "LISTENER_BACKFILL": "false"},
                logdir=logdir,
                name="no-backfill",
            )
        figures = figures_of(result, without)
        print_figures(figures)
        return figures
    finally:
        for proc in (scheduler, default_worker):
            if proc is not None:
                proc.kill(timeout=30)
                proc.close()
        from models.db import database

        database.close()
        drop_database(settings.database_url)
        client = connect_redis(settings.redis_url)
        for key in client.scan_iter(match=f"*{TAG}*", count=5000):
            client.delete(key)
        broker = connect_redis(settings.broker_url)
        for key in broker.scan_iter(match=f"*{TAG}*", count=5000):
            broker.delete(key)


if __name__ == "__main__":
    sys.exit(main())
