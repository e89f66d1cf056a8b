"""Benchmark: a listener worker SIGKILLed mid-game, to its matches streaming again (a new open row).

Run: ``.venv/bin/python bench/recovery.py [--kills 20] [--matches 3] [--stale-kills 1]`` (about
a quarter of an hour with the defaults). Real ``dramatiq`` listener workers at default settings
(heartbeat 30 s, stale threshold 180 s, worker lease 20 s) on a throw-away database, Redis key
prefix and Dramatiq namespace. Two listener workers run; each kill takes the one that runs a
match, waits until every match it ran has a new open row, then starts a replacement.

The lease path (what kickoff does now) is timed over ``--kills`` kills. The stale-threshold path
(what it did before worker leases) is timed over ``--stale-kills`` kills with leases too long to
lapse, the staging scheduler's one-minute sweep and dispatch doing the recovery.

Goal: kill to streaming again p95 <= 45 s at default settings.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._setup import ADMIN_DB, count_options, percentile
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


def start_proc(cmd: list[str], log: Path, env: dict[str, str], *, ready: bool = False) -> ChildProcess:
    """A kickoff process (worker or scheduler) in its own session; ``ready``: wait for the worker."""
    child = ChildProcess(cmd, env=env, log=log)
    if ready and not child.wait_for_output("ready for action", timeout=60):
        child.close()
        raise RuntimeError(f"worker did not start: {log}")
    return child


def stop_gracefully(child: ChildProcess) -> None:
    """Graceful stop: a listener worker records exit 14 and hands its matches off."""
    try:
        child.terminate(timeout=60)
    except subprocess.TimeoutExpired:
        child.kill(timeout=30)
    child.close()


def listener_worker(env: dict[str, str], log: Path) -> ChildProcess:
    cmd = dramatiq_worker_argv("match_listeners", threads=8)
    return start_proc(cmd, log, env, ready=True)


def open_rows() -> dict[str, tuple[str, int]]:
    """match id -> (open row id, pid of the process running it)."""
    from models.db import database

    try:
        rows = database.execute_sql(
            "SELECT match_id::text, id::text, pid FROM match_listener_records WHERE ended_at IS NULL"
        ).fetchall()
    finally:
        database.close()
    return {m: (r, pid) for m, r, pid in rows}


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


def host_of(pid: int, workers: list[ChildProcess]) -> ChildProcess:
    pgid = os.getpgid(pid)
    return next(w for w in workers if w.proc.pid == pgid)


def kill_loop(
    kills: int, match_ids: list[str], env: dict[str, str], logdir: Path, *, timeout: float
) -> list[float]:
    """Two listener workers; kill the host of a match ``kills`` times; return kill-to-streaming seconds."""
    workers = [listener_worker(env, logdir / f"w{i}.log") for i in range(2)]
    try:
        wait_streaming(match_ids, not_rows=set(), timeout=120)
        out = []
        for k in range(kills):
            rows = open_rows()
            victim = host_of(rows[match_ids[k % len(match_ids)]][1], workers)
            victims = [m for m in match_ids if host_of(rows[m][1], workers) is victim]
            old = {rows[m][0] for m in victims}
            killed_at = time.monotonic()
            victim.kill(timeout=30)
            victim.close()
            workers.remove(victim)
            back_at = wait_streaming(victims, not_rows=old, timeout=timeout)
            out.append(back_at - killed_at)
            print(
                f"  kill {k + 1}/{kills}: {len(victims)} matches streaming again after {out[-1]:.1f} s",
                flush=True,
            )
            workers.append(listener_worker(env, logdir / f"w{len(out) + 2}.log"))
        return out
    finally:
        for w in workers:
            stop_gracefully(w)


def summary(name: str, values: list[float]) -> str:
    return (
        f"{name}: p50 {percentile(values, 50):.1f} s, p95 {percentile(values, 95):.1f} s, "
        f"max {max(values):.1f} s over {len(values)} kills"
    )


def main() -> int:
    args = count_options(
        __doc__,
        ("--kills", 20, "kills timed on the lease path"),
        ("--matches", 3, "live matches"),
        ("--stale-kills", 1, "kills timed on the stale path (0: skip)"),
    )
    os.environ.update(ENV)
    env = {**os.environ}

    from config.clock import utcnow
    from config.settings import load_listener_settings
    from models.barriers import connect_redis
    from models.db import database, init_database
    from models.league import League
    from models.match import Match
    from models.migrate import drop_database, migrate

    settings = load_listener_settings(_env_file=None)
    migrate(settings.database_url)
    init_database(settings.database_url)
    logdir = Path(f"/tmp/kickoff-bench-recovery-{TAG}")
    logdir.mkdir(parents=True, exist_ok=True)
    scheduler = default_worker = None
    try:
        league, _ = League.get_or_create(name="nfl")
        ids = [
            str(
                Match.create(
                    league=league, sr_id=f"sr:match:{uuid.uuid4()}", status="inprogress", scheduled=utcnow()
                ).id
            )
            for _ in range(args.matches)
        ]
        database.close()
        # Both paths start the matches the way production does: the scheduler's dispatch each minute.
        default_worker = start_proc(
            dramatiq_worker_argv("default", processes=None), logdir / "default.log", env, ready=True
        )
        scheduler = start_proc([str(BIN / "kickoff"), "scheduler"], logdir / "scheduler.log", env)
        s = settings
        print(
            f"lease path: lease {s.listener_worker_lease_seconds:g} s, heartbeat "
            f"{s.listener_heartbeat_interval_seconds:g} s, stale {s.listener_heartbeat_stale_seconds:g} s",
            flush=True,
        )
        lease = kill_loop(args.kills, ids, env, logdir, timeout=300)
        print(summary("lease path, kill to streaming again", lease), "(goal: p95 <= 45 s)", flush=True)
        if args.stale_kills:
            stale_env = {**env, "LISTENER_WORKER_LEASE_SECONDS": "86400"}  # never lapses: the old path
            print(
                "stale path: leases that never lapse; the scheduler's sweep and dispatch each minute",
                flush=True,
            )
            stale = kill_loop(args.stale_kills, ids, stale_env, logdir, timeout=900)
            print(summary("stale path, kill to streaming again", stale), flush=True)
            print(f"ratio stale/lease at p50: {percentile(stale, 50) / percentile(lease, 50):.1f}x")
    finally:
        for proc in (scheduler, default_worker):
            if proc is not None:
                proc.kill(timeout=30)
                proc.close()
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
