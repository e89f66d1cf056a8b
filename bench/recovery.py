"""Benchmark: listener takeover: a worker SIGKILLed mid-game, and a graceful (SIGTERM) hand-off.

Run: ``.venv/bin/python bench/recovery.py [--kills 20] [--handoffs 5] [--matches 3] [--stale-kills 0]
[--feed [--feed-kills 20]]`` (about six minutes with the defaults, about half an hour with
``--feed``). Real
``dramatiq`` listener workers at default settings (heartbeat 30 s, stale threshold 180 s, worker
lease 8 s, reaper poll 0.5 s, hand-off bound 5 s) on a throw-away database, Redis key prefix and
Dramatiq namespace; two listener workers are always up. The fresh key prefix is a new Redis data
epoch, which the reaper does not judge for a lease and a renewal (lifecycle.lease): the first
kill waits until it is older, as a production Redis's is.

* Kills: each kill SIGKILLs the worker running a match, times until every match it ran has a new
  open row (the lease path: the survivor's reaper), then starts a replacement. Goal: p99 <= 10 s.
* Hand-offs: each SIGTERMs the worker running a match while the other one is up; per match the
  seconds without a stream are the new row's ``created_at`` minus the old row's ``ended_at``
  (PostgreSQL's one clock). Goal: at most 1 s.
* ``--stale-kills``: kills with leases too long to lapse (what kickoff did before worker leases:
  the scheduler's one-minute sweep and dispatch recover).
* ``--feed`` (instead of the above): srsim serves one mlb game per match and the real
  MatchListener body listens; the kill scenario (``--feed-kills`` kills) runs twice,
  LISTENER_BACKFILL=true and false, each with fresh matches and games, and prints the events lost
  per kill: the ids srsim sent from the moment every match streamed to the game's end, minus those
  in the match's archive ``{DATA_DIR}/listener/mlb/{shortcode}.json`` once the game is over.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._setup import ADMIN_DB, percentile
from bench._srsim import start_sim, write_games
from cli.processes import ChildProcess, dramatiq_worker_argv

TAG = uuid.uuid4().hex[:8]
BIN = Path(sys.executable).parent
ENV = {
    "DATABASE_URL": f"{ADMIN_DB}/kickoff_bench_{TAG}",
    "REDIS_KEY_PREFIX": f"kickoffbench:{TAG}:",
    "BROKER_NAMESPACE": f"kickoffbench-{TAG}",
    "LISTENER_BODY": "listener.testing:ScriptedListener",  # runs until stopped: no feed needed
    "APP_ENV": "staging",  # the scheduler dispatches live matches and sweeps every minute
}
#: --feed: seconds between two events of a game, and the game's length beyond the kills.
EVENT_INTERVAL = 0.5
GAME_TAIL_SECONDS = 20.0


def start_proc(cmd: list[str], log: Path, env: dict[str, str], *, ready: bool = False) -> ChildProcess:
    """A kickoff process (worker or scheduler) in its own session; ``ready``: wait for the worker."""
    child = ChildProcess(cmd, env=env, log=log)
    if ready and not child.wait_for_output("ready for action", timeout=60):
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


def listener_worker(env: dict[str, str], log: Path) -> ChildProcess:
    cmd = dramatiq_worker_argv("match_listeners", threads=8)
    return start_proc(cmd, log, env, ready=True)


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


def handoff_gaps(old_rows: set[str]) -> list[float]:
    """Per old row: its successor's ``created_at`` minus its ``ended_at`` (seconds, PostgreSQL's clock)."""
    rows = _query(
        "SELECT extract(epoch FROM (SELECT min(n.created_at) FROM match_listener_records n "
        "WHERE n.match_id = o.match_id AND n.created_at > o.created_at) - o.ended_at) "
        "FROM match_listener_records o WHERE o.id = ANY(%s::uuid[])",
        (sorted(old_rows),),
    )
    return [float(gap) for (gap,) in rows]


def wait_streaming(match_ids: list[str], *, not_rows: set[str], timeout: float) -> float:
    """Wait until every match has an open row other than ``not_rows``; return when (monotonic)."""
    deadline = time.monotonic() + timeout
    while True:
        rows = open_rows()
        if all(m in rows and rows[m][0] not in not_rows for m in match_ids):
            return time.monotonic()
        if time.monotonic() > deadline:
            raise RuntimeError(f"matches not streaming again within {timeout} s")
        time.sleep(0.1)


def wait_epoch_judged() -> None:
    """Wait until the reaper may judge leases: this run's fresh key prefix starts a new Redis data
    epoch, which a production Redis left behind long ago (the reaper waits a lease and a renewal)."""
    from config.settings import load_listener_settings
    from models.coordination import CoordinationStore

    settings = load_listener_settings(_env_file=None)
    barriers = CoordinationStore.from_settings(settings)
    window = settings.listener_worker_lease_seconds * 1.25 + 1
    while True:
        age = barriers.live_worker_leases([])[1]
        if age is not None and age >= window + 1:
            return
        time.sleep(0.5)


def host_of(pid: int, workers: list[ChildProcess]) -> ChildProcess:
    pgid = os.getpgid(pid)
    return next(w for w in workers if w.proc.pid == pgid)


def kill_loop(
    kills: int,
    match_ids: list[str],
    env: dict[str, str],
    logdir: Path,
    *,
    timeout: float,
    graceful: bool = False,
    on_streaming: Callable[[], None] | None = None,
    after: Callable[[], None] | None = None,
) -> tuple[list[float], list[float]]:
    """Two listener workers; stop the host of a match ``kills`` times (SIGKILL, or SIGTERM with
    ``graceful``); return the seconds to streaming again per stop, and the hand-off gaps per match.
    ``on_streaming`` is called once every match streams, before the first stop; ``after`` once the
    stops are done, while both workers still run."""
    workers = [listener_worker(env, logdir / f"w{TAG}-{time.monotonic_ns()}.log") for _ in range(2)]
    what = "SIGTERM" if graceful else "kill"
    try:
        wait_streaming(match_ids, not_rows=set(), timeout=120)
        wait_epoch_judged()
        if on_streaming is not None:
            on_streaming()
        out: list[float] = []
        gaps: list[float] = []
        for k in range(kills):
            rows = open_rows()
            victim = host_of(rows[match_ids[k % len(match_ids)]][1], workers)
            victims = [m for m in match_ids if host_of(rows[m][1], workers) is victim]
            old = {rows[m][0] for m in victims}
            stopped_at = time.monotonic()
            if graceful:
                os.kill(victim.proc.pid, signal.SIGTERM)  # the master forwards it
            else:
                victim.kill(timeout=30)
            back_at = wait_streaming(victims, not_rows=old, timeout=timeout)
            if graceful:
                stop_gracefully(victim)  # already exiting: reaps it
                gaps += handoff_gaps(old)
            else:
                victim.close()
            workers.remove(victim)
            out.append(back_at - stopped_at)
            print(
                f"  {what} {k + 1}/{kills}: {len(victims)} matches streaming again after {out[-1]:.1f} s",
                flush=True,
            )
            workers.append(listener_worker(env, logdir / f"w{TAG}-{time.monotonic_ns()}.log"))
            wait_streaming(match_ids, not_rows=set(), timeout=timeout)
        if after is not None:
            after()
        return out, gaps
    finally:
        for w in workers:
            stop_gracefully(w)


def summary(name: str, values: list[float], unit: str = "kills") -> str:
    return (
        f"{name}: p50 {percentile(values, 50):.2f} s, p99 {percentile(values, 99):.2f} s, "
        f"max {max(values):.2f} s over {len(values)} {unit}"
    )


def create_matches(n: int, league_name: str) -> list[tuple[str, str]]:
    """``n`` live matches of ``league_name``: (internal id, sr_id)."""
    from config.clock import utcnow
    from models.db import database
    from models.league import League
    from models.match import Match

    league, _ = League.get_or_create(name=league_name)
    out = []
    for _ in range(n):
        sr_id = f"sr:match:{uuid.uuid4()}"
        match = Match.create(league=league, sr_id=sr_id, status="inprogress", scheduled=utcnow())
        out.append((str(match.id), sr_id))
    database.close()
    return out


def stop_matches(match_ids: list[str]) -> None:
    """Operator stops (a scenario's end): the listeners end, no start of them runs any more."""
    from config.settings import load_listener_settings
    from lifecycle.cleanup import stop_match_listener
    from models.coordination import CoordinationStore
    from models.db import database

    settings = load_listener_settings(_env_file=None)
    barriers = CoordinationStore.from_settings(settings)
    try:
        for match_id in match_ids:
            stop_match_listener(match_id, settings=settings, barriers=barriers, stopped_by="bench")
    finally:
        database.close()


def sim_sessions(url: str) -> dict[str, dict]:
    """srsim's sessions by sr_id (position: the index of the next event not yet sent)."""
    with urllib.request.urlopen(f"{url}/_srsim/sessions", timeout=10) as answer:
        return {session["sr_id"]: session for session in json.load(answer)["sessions"]}


def feed_scenario(
    backfill: bool, args: argparse.Namespace, env: dict[str, str], logdir: Path
) -> tuple[list[float], float]:
    """One kill scenario on srsim with the real body: kill-to-streaming seconds, events lost per kill.

    The events counted are those srsim sent from the moment every match first streamed to the
    game's end; lost are those of them missing from the match's archive once the game is over.
    """
    from listener.archive import archive_path, read_events, shortcode_for
    from srsim.script import load_script

    kills = args.feed_kills
    matches = create_matches(args.matches, "mlb")
    seconds = kills * 15.0 + 90.0 + GAME_TAIL_SECONDS  # the first dispatch tick may take a minute
    script = write_games(
        logdir / f"games-{backfill}.json",
        [sr for _, sr in matches],
        start_after=0.0,
        event_interval=EVENT_INTERVAL,
        event_count=int(seconds / EVENT_INTERVAL),
    )
    sim, url = start_sim(script, heartbeat_seconds=1.0)
    data_dir = logdir / f"data-{backfill}"
    fenv = {
        **env,
        "LISTENER_BODY": "listener.match_listener:MatchListener",
        "SPORTRADAR_BASE_URL": url,
        "DATA_DIR": str(data_dir),
        "LISTENER_BACKFILL": "true" if backfill else "false",
    }
    first: dict[str, int] = {}
    try:
        ids = [m for m, _ in matches]

        def mark() -> None:
            first.update({sr: session["position"] for sr, session in sim_sessions(url).items()})

        def game_over() -> None:  # the listeners follow the games to their end, then stop
            deadline = time.monotonic() + seconds + 60
            while time.monotonic() < deadline:
                if all(s["position"] >= s["events"] for s in sim_sessions(url).values()):
                    break
                time.sleep(1)
            time.sleep(5)  # the last events reach the archives
            stop_matches(ids)

        times, _ = kill_loop(kills, ids, fenv, logdir, timeout=300, on_streaming=mark, after=game_over)
    finally:
        sim.kill()
        sim.wait(10)
    lost = 0
    scheduled = datetime.now(UTC)  # event ids do not depend on it
    for game in load_script(script):
        sent = game.envelopes(scheduled)[first.get(game.sr_id, 0) :]
        emitted = {_event_id(e) for e in sent} - {None}
        path = archive_path(data_dir, "mlb", shortcode_for(game.sr_id))
        kept = {_event_id(e) for e in read_events(path)} if path.exists() else set()
        lost += len(emitted - kept)
    return times, lost / max(1, kills)


def _event_id(item: object) -> str | None:
    """The provider's event id of an envelope or an archived event (None: not an event)."""
    if not isinstance(item, dict):
        return None
    for holder in (
        item.get("payload", {}).get("event") if isinstance(item.get("payload"), dict) else None,
        item.get("event"),
        item,
    ):
        if isinstance(holder, dict) and isinstance(holder.get("id"), str) and "type" in holder:
            return holder["id"]
    return None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kills", type=int, default=20, help="SIGKILLs timed on the lease path")
    parser.add_argument("--handoffs", type=int, default=5, help="graceful SIGTERM hand-offs timed (0: skip)")
    parser.add_argument("--matches", type=int, default=3, help="live matches")
    parser.add_argument("--stale-kills", type=int, default=0, help="kills timed on the stale path (0: skip)")
    parser.add_argument(
        "--feed", action="store_true", help="srsim and the real listener body; events lost per kill"
    )
    parser.add_argument("--feed-kills", type=int, default=20, help="kills per --feed scenario")
    args = parser.parse_args()
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
        f"ran: --kills {args.kills} --handoffs {args.handoffs} --matches {args.matches} "
        f"--stale-kills {args.stale_kills}"
        f"{f' --feed --feed-kills {args.feed_kills}' if args.feed else ''}; lease "
        f"{s.listener_worker_lease_seconds:g} s (renewed every {s.listener_worker_lease_seconds / 4:g} s), "
        f"reaper poll {s.listener_reaper_poll_seconds:g} s, hand-off bound {s.listener_handoff_seconds:g} s, "
        f"heartbeat {s.listener_heartbeat_interval_seconds:g} s, "
        f"stale {s.listener_heartbeat_stale_seconds:g} s",
        flush=True,
    )
    try:
        # Matches start the way production starts them: the scheduler's dispatch each minute.
        default_worker = start_proc(
            dramatiq_worker_argv("default", processes=None), logdir / "default.log", env, ready=True
        )
        scheduler = start_proc([str(BIN / "kickoff"), "scheduler"], logdir / "scheduler.log", env)
        if args.feed:
            for backfill in (True, False):
                times, lost = feed_scenario(backfill, args, env, logdir)
                label = f"feed, LISTENER_BACKFILL={'true' if backfill else 'false'}"
                print(summary(f"{label}, kill to streaming again", times), flush=True)
                print(f"{label}: events lost per kill {lost:.1f} (all {args.matches} matches)", flush=True)
            return 0
        ids = [m for m, _ in create_matches(args.matches, "nfl")]
        lease, _ = kill_loop(args.kills, ids, env, logdir, timeout=300)
        print(summary("lease path, kill to streaming again", lease), "(goal: p99 <= 10 s)", flush=True)
        if args.handoffs:
            back, gaps = kill_loop(args.handoffs, ids, env, logdir, timeout=120, graceful=True)
            print(summary("graceful hand-off, SIGTERM to streaming again", back, "hand-offs"), flush=True)
            print(summary("graceful hand-off, seconds without a stream", gaps, "matches"), "(goal: <= 1 s)")
        if args.stale_kills:
            stale_env = {**env, "LISTENER_WORKER_LEASE_SECONDS": "86400"}  # never lapses: the old path
            print("stale path: leases that never lapse; the scheduler's sweep and dispatch each minute")
            stale, _ = kill_loop(args.stale_kills, ids, stale_env, logdir, timeout=900)
            print(summary("stale path, kill to streaming again", stale), flush=True)
            print(f"ratio stale/lease at p50: {percentile(stale, 50) / percentile(lease, 50):.1f}x")
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
    return 0


if __name__ == "__main__":
    sys.exit(main())
