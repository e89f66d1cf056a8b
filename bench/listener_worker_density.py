"""Listener density in the real listener worker: N matches in ONE ``dramatiq`` listener-worker process.

For each N: a private database (migrated, dropped at the end), Redis prefix and broker namespace;
``kickoff sim serve`` with N is_test games at one event per second each (kick-offs spread over a
second, stream heartbeat every 5 s); ``dramatiq actors --processes 1 --threads N --queues
match_listeners``; dispatches of 50 new matches per second until N run. Each start runs the whole lifecycle
(lifecycle row, start lock, the process's one heartbeat thread and one stop-flag poller) around a
MatchListener (record-only: LISTENER_SKIP_PROCESSING=true). Measured on the worker process:
RSS above its idle baseline (N idle Dramatiq threads), CPU over a steady window, and lifecycle
heartbeat lag: the oldest open row's heartbeat age minus LISTENER_HEARTBEAT_INTERVAL_SECONDS.

Goals (issue 4): <= 1 MB RSS per listener, <= 50 % of one core, every match running, lifecycle
heartbeats on time (lag < one interval, 5 s); each judged on the worst size of the run (a size
whose run failed counts all its matches as not running).

    .venv/bin/python bench/listener_worker_density.py [--sizes 100,500,1000] [--window 20] [--json] [--save]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._setup import density_figures, free_port, sample
from bench._srsim import write_games
from bench._verdict import DENSITY_GOALS, Bench, Goal
from cli.processes import ChildProcess, dramatiq_worker_argv

HEARTBEAT_INTERVAL = 5.0
WAVE = 50  # matches dispatched per second
BENCH = Bench(
    "listener_worker_density",
    __doc__,
    [
        *DENSITY_GOALS,
        Goal("not_running", 0, at_most=True, unit="matches", source="issue 4: every match runs"),
        Goal("hb_lag_max_s", HEARTBEAT_INTERVAL, at_most=True, unit="s", source="issue 4: on time"),
    ],
)


def _bin(name: str) -> str:
    return str(Path(sys.executable).with_name(name))


def _worker_child(pid: int, n: int, timeout: float = 120) -> object:
    import psutil

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        children = psutil.Process(pid).children(recursive=True)
        busiest = max(children, key=lambda c: c.num_threads(), default=None)
        if busiest is not None and busiest.num_threads() >= n:
            return busiest
        time.sleep(0.5)
    raise SystemExit(f"listener worker did not start {n} threads")


def run(n: int, warmup: float, window: float, tmp: Path) -> dict:
    run_id = uuid.uuid4().hex[:8]
    base_url = os.environ.get("DATABASE_URL", "postgresql://postgres@127.0.0.1:5432/kickoff").rsplit("/", 1)[
        0
    ]
    port = free_port()
    env = dict(os.environ)
    env.update(
        {
            "DATABASE_URL": f"{base_url}/kickoff_bench_{run_id}",
            "REDIS_KEY_PREFIX": f"kickoffbench:{run_id}:",
            "BROKER_NAMESPACE": f"kickoffbench-{run_id}",
            "APP_ENV": "develop",
            "DATA_DIR": str(tmp / "data"),
            "SPORTRADAR_BASE_URL": f"http://127.0.0.1:{port}",
            "LISTENER_SKIP_PROCESSING": "true",
            "LISTENER_HEARTBEAT_INTERVAL_SECONDS": str(HEARTBEAT_INTERVAL),
            "LISTENER_HEARTBEAT_STALE_SECONDS": "120",
            "LISTENER_READ_TIMEOUT_SECONDS": "30",
        }
    )
    os.environ.update(env)

    from config.clock import utcnow
    from config.settings import load_listener_settings
    from models.coordination import CoordinationStore
    from models.db import connection_scope, database, init_database
    from models.league import League
    from models.match import Match
    from models.migrate import drop_database, migrate

    settings = load_listener_settings()
    migrate(settings.database_url)
    init_database(settings.database_url)
    procs: list[ChildProcess] = []
    try:
        ids = [str(uuid.uuid4()) for _ in range(n)]
        events = int(60 + warmup + window)
        script = write_games(
            tmp / "games.json", ids, start_after=5, event_interval=1.0, event_count=events, is_test=True
        )
        with connection_scope():
            league = League.create(name="mlb")
        log = tmp / "procs.log"
        procs.append(
            ChildProcess(
                [
                    _bin("kickoff"),
                    "sim",
                    "serve",
                    "--port",
                    str(port),
                    "--script",
                    str(script),
                    "--heartbeat-seconds",
                    "5",
                ],
                env=env,
                log=log,
                append=True,
            )
        )
        procs.append(
            ChildProcess(
                dramatiq_worker_argv("match_listeners", threads=n),
                env=env,
                log=log,
                append=True,
            )
        )
        child = _worker_child(procs[-1].pid, n)
        time.sleep(3)
        baseline = child.memory_info().rss

        from actors.listeners import send_start, send_starts
        from lifecycle.dispatch import dispatch_upcoming_match_listeners

        coordination = CoordinationStore.from_settings(settings)
        t_dispatch = time.monotonic()
        # Matches enter the dispatch window in waves of WAVE per second, as kick-offs are spread out;
        # one wave of N at once would open N PostgreSQL connections in the start path (max_connections).
        for start in range(0, n, WAVE):
            with connection_scope():
                Match.insert_many(
                    [
                        {
                            "id": uuid.uuid4(),
                            "sr_id": i,
                            "league": league,
                            "is_test": True,
                            "scheduled": utcnow(),
                            "title": f"bench {start + k}",
                        }
                        for k, i in enumerate(ids[start : start + WAVE])
                    ]
                ).execute()
            dispatch_upcoming_match_listeners(
                within_minutes=60,
                is_test=True,
                settings=settings,
                coordination=coordination,
                send=send_start,
                send_batch=send_starts,
            )
            time.sleep(1)
        open_sql = (
            "SELECT count(*), extract(epoch FROM max(now() - heartbeat_at)) FROM match_listener_records "
            "WHERE ended_at IS NULL"
        )
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            with connection_scope():
                count, _ = database.execute_sql(open_sql).fetchone()
            if count >= n:
                break
            time.sleep(0.5)
        ramp = time.monotonic() - t_dispatch
        time.sleep(warmup)
        archive_dir = tmp / "data" / "listener" / "mlb"

        def archived() -> int:
            return sum(p.read_bytes().count(b"\n") for p in archive_dir.glob("*.json"))

        first = sample(child, archived())
        ages: list[float] = []
        counts: list[int] = []
        while time.monotonic() - first.at < window:
            with connection_scope():
                count, age = database.execute_sql(open_sql).fetchone()
            counts.append(int(count))
            ages.append(float(age or 0))
            time.sleep(1)
        last = sample(child, archived())
        rss = child.memory_info().rss
        return {
            "n": n,
            "running": min(counts),
            "ramp_s": ramp,
            **density_figures(n=n, baseline_rss=baseline, rss=rss, first=first, last=last),
            "hb_lag_max_s": max(0.0, max(ages) - HEARTBEAT_INTERVAL),
            "hb_age_max_s": max(ages),
        }
    finally:
        for p in procs:
            p.close()
        database.close()
        drop_database(settings.database_url)
        _clean_redis(settings)


def _clean_redis(settings: object) -> None:
    from models.coordination import connect_redis

    for url, pattern in (
        (settings.redis_url, f"{settings.redis_key_prefix}*"),
        (settings.broker_url, f"{settings.broker_namespace}*"),
    ):
        client = connect_redis(url)
        keys = list(client.scan_iter(match=pattern, count=1000))
        if keys:
            client.delete(*keys)


def main() -> int:
    parser = BENCH.parser()
    parser.add_argument("--sizes", default="100,500,1000", help="matches per run, comma-separated")
    parser.add_argument("--warmup", type=float, default=10.0, help="seconds before the measured window")
    parser.add_argument("--window", type=float, default=20.0, help="seconds of the measured window")
    parser.add_argument("--one", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        with tempfile.TemporaryDirectory() as d:
            print(json.dumps(run(args.one, args.warmup, args.window, Path(d))), flush=True)
        return 0
    try:
        sizes = [int(x) for x in args.sizes.split(",")]
    except ValueError:
        parser.error(f"--sizes: comma-separated whole numbers, not {args.sizes!r}")
    if min(sizes) < 1 or args.window < 1 or args.warmup < 0:
        parser.error("--sizes must be at least 1, --window at least 1 s")
    with BENCH.output(args):
        return BENCH.finish(args, measure(sizes, args.warmup, args.window))


def measure(sizes: list[int], warmup: float, window: float) -> dict[str, object]:
    print(
        f"listener worker density: N matches in one dramatiq listener worker, 1 event/s each, "
        f"lifecycle heartbeat every {HEARTBEAT_INTERVAL:.0f} s"
    )
    print(
        f"{'N':>5} {'running':>7} {'ramp s':>6} {'base MB':>8} {'RSS MB':>7} {'KB/listener':>11} "
        f"{'CPU %':>6} {'events/s':>8} {'hb lag max s':>12}"
    )
    by_size: dict[str, dict] = {}
    failed = 0
    for n in sizes:
        # Each size in its own process: the actors package binds one broker per process.
        out = subprocess.run(
            [
                sys.executable,
                __file__,
                "--one",
                str(n),
                "--warmup",
                str(warmup),
                "--window",
                str(window),
            ],
            capture_output=True,
            text=True,
            timeout=600,
        )
        if out.returncode != 0:
            print(f"{n:>5} failed: {out.stderr[-1500:]}")
            failed += n
            continue
        r = json.loads(out.stdout.strip().splitlines()[-1])
        by_size[str(n)] = r
        print(
            f"{r['n']:>5} {r['running']:>7} {r['ramp_s']:>6.1f} {r['baseline_mb']:>8.1f} {r['rss_mb']:>7.1f} "
            f"{r['per_listener_kb']:>11.0f} {r['cpu_pct']:>6.1f} {r['events_per_s']:>8.0f} "
            f"{r['hb_lag_max_s']:>12.1f}"
        )
    rows = by_size.values()
    return {
        "sizes": by_size,
        "largest": max(sizes),
        "per_listener_kb": max((r["per_listener_kb"] for r in rows), default=None),
        "cpu_pct": max((r["cpu_pct"] for r in rows), default=None),
        "not_running": failed + sum(r["n"] - r["running"] for r in rows),
        "hb_lag_max_s": max((r["hb_lag_max_s"] for r in rows), default=None),
    }


if __name__ == "__main__":
    threading.stack_size(0)
    sys.exit(main())
