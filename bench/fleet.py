"""Fleet benchmark: N listener worker processes x M listeners each, all started by one dispatch tick.

A throw-away database, two private ``redis-server`` processes (kickoff's keys and, with the Redis
broker, the broker: so their command counts are this benchmark's alone), a RabbitMQ vhost with
``--broker amqp``, and K ``kickoff sim serve --no-db`` processes holding every game (worker i
streams from simulator i mod K), in the provider's framing (newline-delimited JSON over chunked HTTP;
``--format sse``: srsim's SSE, which every run saved before the option read). Each game sends a stream
heartbeat every ``--stream-heartbeat`` seconds and an event every ``--event-seconds`` (kick-offs
spread over one event interval). Each
listener runs the whole lifecycle (row, start lock, the process's heartbeat thread, stop watcher,
worker lease) around a record-only MatchListener. Then:

* one dispatch tick (in this process, the real batch sender) sends the N x M starts; its duration;
* time until every match has an open lifecycle row and every worker holds M stream connections;
* over a steady window: RSS and CPU per process, the largest lifecycle heartbeat lag (oldest open
  row's heartbeat age minus LISTENER_HEARTBEAT_INTERVAL_SECONDS), Redis commands/s (INFO
  total_commands_processed), PostgreSQL rows written/s and commits/s (pg_stat_database of the
  benchmark's database), stream messages received/s (events archived, plus heartbeats);
* the peak number of PostgreSQL connections to the benchmark's database (sampled every 0.2 s
  from before the tick to the end);
* from a message's send to its row committed in the event log (issue 34), p50/p99 over the
  window's live rows and the p99 by minute of the window (whether a miss is a backlog draining or
  the steady state), two ways: from the send (the goal's figure: ``arrived_at``, the insert's
  transaction time, minus ``srsim_sent_at``, which the simulators, run with ``--stamp-sends``, add
  to each frame as they write it: the message arriving, since the listeners read it from the same
  box's loopback), and from srsim's schedule (``arrived_at`` minus the event's ``created_at``, less
  each game's smallest such lag, srsim's dates being off by a constant per game: a simulator
  waiting for a core on the shared box counts as kickoff's delay there; the figure of every run
  saved before the stamp); and PostgreSQL bytes per event (the log's tables and indexes after the
  window over their rows).

The window measures live games only: the simulated games last ``--max-seconds`` from their
kick-off, ``--kickoff-after`` seconds after their simulator listens (srsim starts its clocks then;
default 0, so listeners that connect during a long ramp get their game so far replayed first: a
backlog the window may still be reading), after which their streams carry heartbeats and nothing
else; so the window ends 15 s before the first simulator's games close at the latest (the report
says so when it is cut). With ``--kickoff-after`` the warm-up starts at kick-off. The report
counts the runs that ended during the window by exit code and reason (a run that ends is a
listener lost unless its reason says otherwise).

Goals (issue 34 and the fleet's own): tick <= 1 s, every listener running through the window,
lifecycle heartbeat lag <= 2 s, <= 100 PostgreSQL connections, message sent to row p99 <= 1 s.

    .venv/bin/python bench/fleet.py [--workers 10] [--listeners 1000] [--broker redis|amqp]
        [--sims K] [--format ndjson|sse] [--stream-heartbeat 5] [--event-seconds 30] [--window 90]
        [--db-slots 4] [--db-pool P] [--pgbouncer POOL] [--kickoff-after S] [--json] [--save]

Issue 34's size: ``--workers 10 --listeners 1000 --event-seconds 2 --window 300`` (10,000
listeners at 0.5 events/s each, 5,000 events/s in all, for 5 minutes).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._setup import ADMIN_DB, AMQP_HOST, _ctl
from bench._srsim import start_sim, write_games
from bench._verdict import Bench, Goal
from bench.listener_worker_density import _bin
from harness.background import BackgroundLoop
from harness.private_pgbouncer import PrivatePgbouncer
from harness.private_redis import PrivateRedis

QUEUE = "match_listeners"
#: The stream framings the listeners can ask srsim for (--format), as the report names them.
_FORMATS = {"ndjson": "NDJSON streams", "sse": "SSE streams"}
BENCH = Bench(
    "fleet",
    __doc__,
    [
        Goal("tick_s", 1.0, at_most=True, unit="s", source="the dispatch tick of N starts"),
        Goal("running_fraction", 1.0, at_most=False, source="every listener running through the window"),
        Goal("hb_lag_max_s", 2.0, at_most=True, unit="s", source="issue 34: heartbeat lag <= 2 s"),
        Goal("peak_pg_connections", 100, at_most=True, source="issue 34: <= 100 PostgreSQL connections"),
        Goal(
            "sent_p99_s",
            1.0,
            at_most=True,
            unit="s",
            source="issue 34: p99 from the message arriving (srsim's stamped send) to its row committed",
        ),
    ],
)


def _progress(text: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {text}", file=sys.stderr, flush=True)


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


class PgSampler(BackgroundLoop):
    """Samples the connections to one database every 0.2 s in a thread; keeps the peak."""

    interval = 0.2

    def __init__(self, db_name: str) -> None:
        super().__init__()
        self.db_name = db_name
        self.peak = 0
        self._conn: Any = None

    def step(self) -> None:
        import psycopg2

        if self._conn is None:
            self._conn = psycopg2.connect(f"{ADMIN_DB}/postgres")
            self._conn.autocommit = True
        with self._conn.cursor() as cur:
            cur.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()",
                (self.db_name,),
            )
            self.peak = max(self.peak, int(cur.fetchone()[0]))

    def __exit__(self, *exc: object) -> None:
        super().__exit__(*exc)
        if self._conn is not None:
            self._conn.close()


def _pg_counters(db_name: str) -> tuple[int, int]:
    """Rows written (inserted + updated + deleted) and commits of ``db_name`` so far."""
    import psycopg2

    conn = psycopg2.connect(f"{ADMIN_DB}/postgres")
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT pg_stat_clear_snapshot()")
            cur.execute(
                "SELECT tup_inserted + tup_updated + tup_deleted, xact_commit FROM pg_stat_database "
                "WHERE datname = %s",
                (db_name,),
            )
            rows, commits = cur.fetchone()
            return int(rows), int(commits)
    finally:
        conn.close()


def _redis_commands(url: str) -> int:
    import redis

    client = redis.Redis.from_url(url)
    try:
        return int(client.info("stats")["total_commands_processed"])
    finally:
        client.close()


def _worker_child(pid: int, threads: int, timeout: float = 180.0) -> Any:
    """The Dramatiq worker process (child of the master) once it runs ``threads`` threads."""
    import psutil

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for child in psutil.Process(pid).children(recursive=True):
            if child.num_threads() >= threads:
                return child
        time.sleep(0.5)
    raise SystemExit(f"worker {pid} did not start {threads} threads within {timeout:.0f} s")


def _streams(sim_ports: set[int]) -> int:
    """Established stream connections the simulators accepted (one read of /proc/net/tcp)."""
    wanted = {f"{port:04X}" for port in sim_ports}
    count = 0
    with open("/proc/net/tcp") as table:
        next(table)
        for line in table:
            fields = line.split(None, 4)
            if fields[3] == "01" and fields[1].rsplit(":", 1)[1] in wanted:  # ESTABLISHED, local port
                count += 1
    return count


def _archived_lines(archive_dir: Path) -> int:
    """Messages in the event log (every match of the run; ``archive_dir`` is no longer read)."""
    from models.event_log import total_events

    return total_events()


#: Each live row committed in the window: its match, when it arrived, its lag over srsim's stamp of
#: its send (NULL without one), and its lag over the event's ``created_at`` less its match's
#: smallest such lag (``_commit_latency``).
_LAGS = """
SELECT match_id, arrived_at, sent_lag, lag - min(lag) OVER (PARTITION BY match_id) AS lag
  FROM (SELECT match_id, arrived_at,
               extract(epoch FROM arrived_at) - (message->>'srsim_sent_at')::float8 AS sent_lag,
               extract(epoch FROM arrived_at - (message->'payload'->'event'->>'created_at')::timestamptz)
                   AS lag
          FROM match_events
         WHERE arrived_at >= %(since)s AND arrived_at < %(until)s AND kind = 'live'
           AND message->'payload'->'event' ? 'created_at') b
"""
#: Both lags' p50 and p99 and the rows' count over the window (the row whose minute is NULL) and by
#: minute of it, in one pass over the window's rows (an ordered-set aggregate leaves NULLs out).
_COMMIT_LATENCY = f"""
SELECT floor(extract(epoch FROM arrived_at - %(since)s::timestamptz) / 60)::int AS minute,
       percentile_cont(0.5) WITHIN GROUP (ORDER BY sent_lag),
       percentile_cont(0.99) WITHIN GROUP (ORDER BY sent_lag),
       percentile_cont(0.5) WITHIN GROUP (ORDER BY lag),
       percentile_cont(0.99) WITHIN GROUP (ORDER BY lag), count(*)
  FROM ({_LAGS}) t
 GROUP BY GROUPING SETS ((minute), ())
 ORDER BY minute NULLS FIRST
"""
#: The bench's own statement timeout: its one query reads every row of the window (1.5 million at
#: 10,000 listeners) while the fleet still writes.
ANALYSIS_TIMEOUT_SECONDS = 900.0


def _db_now() -> Any:
    """PostgreSQL's clock now (the window's bounds are compared with ``arrived_at``, set by it)."""
    from models.db import connection_scope, database

    with connection_scope():
        return database.execute_sql("SELECT now()").fetchone()[0]


def _figure(value: Any) -> float | None:
    return None if value is None else float(value)


def _commit_latency(since: Any, until: Any) -> dict[str, Any]:
    """A live message's send to its row committed, over the rows committed from ``since`` to
    ``until``, two ways: ``sent_*`` from srsim's stamp of the send (``srsim_sent_at``, same box and
    clock as PostgreSQL), ``commit_*`` from srsim's schedule (the event's ``created_at``, less the
    match's smallest such lag: srsim dates its events from when it built its scripts, seconds before
    its clocks start, so each game's ``created_at`` is off by a constant; that figure leaves out the
    fastest message's own latency, a few milliseconds while the listeners keep up but a backlog's
    smallest lag when they do not, and counts srsim's lateness). Each has its p50,
    p99 and p99 by minute, first to last: whether a miss is a backlog draining (the ramp's) or the
    steady state's (not a goal: the goal is the whole window's)."""
    from models.db import connection_scope, database

    with connection_scope():
        rows = database.execute_sql(_COMMIT_LATENCY, {"since": since, "until": until}).fetchall()
    (_, s50, s99, c50, c99, n), minutes = rows[0], rows[1:]  # the whole window first (grouping set ())
    return {
        "sent_p50_s": _figure(s50),
        "sent_p99_s": _figure(s99),
        "sent_p99_by_minute_s": [_figure(m[2]) for m in minutes],
        "commit_p50_s": _figure(c50),
        "commit_p99_s": _figure(c99),
        "commit_p99_by_minute_s": [_figure(m[4]) for m in minutes],
        "commit_rows": int(n),
    }


#: Seconds before the first simulated games close at which the window ends at the latest.
GAME_END_MARGIN = 15.0


#: What makes two exit reasons of one kind differ: a URL (each match's own) and a duration.
_REASON_DETAILS = ((re.compile(r"https?://\S+"), "URL"), (re.compile(r"\d+(\.\d+)? s\b"), "N s"))


def reason_kind(reason: str) -> str:
    """``reason`` with its URLs and durations masked: the runs a kind of failure ended count together
    (a 10,000-listener run printed 1,639 reasons for 2 kinds)."""
    for pattern, mask in _REASON_DETAILS:
        reason = pattern.sub(mask, reason)
    return reason


def _ended_since(since: Any) -> dict[str, int]:
    """Runs ended since ``since`` by exit code and kind of reason (``"0: game over"``), most first."""
    from models.db import connection_scope, database

    with connection_scope():
        rows = database.execute_sql(
            "SELECT exit_code, coalesce(exit_reason, ''), count(*) FROM match_listener_records "
            "WHERE ended_at >= %s GROUP BY 1, 2",
            (since,),
        ).fetchall()
    kinds = Counter[str]()
    for code, reason, n in rows:
        kinds[f"{code}: {reason_kind(reason)}"] += int(n)
    return dict(kinds.most_common())


def _log_bytes() -> float | None:
    """PostgreSQL bytes per logged message: the log's tables, partitions and indexes over its rows."""
    from models.db import connection_scope, database

    with connection_scope():
        (size,) = database.execute_sql(
            "SELECT sum(pg_total_relation_size(c.oid)) FROM pg_class c "
            "WHERE c.relkind = 'r' AND c.relname ~ '^match_event(s|_keys)'"
        ).fetchone()
        (rows,) = database.execute_sql("SELECT count(*) FROM match_events").fetchone()
    return float(size) / rows if rows else None


def run(args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    import psutil

    tag = uuid.uuid4().hex[:8]
    db_name = f"kickoff_bench_{tag}"
    total = args.workers * args.listeners
    locks_redis = PrivateRedis(tmp / "redis-locks").start()
    broker_redis = PrivateRedis(tmp / "redis-broker").start() if args.broker == "redis" else None
    vhost = f"kickoff_bench_{tag}"
    if args.broker == "amqp":
        _ctl("add_vhost", vhost)
        _ctl("set_permissions", "-p", vhost, "guest", ".*", ".*", ".*")
    broker_url = broker_redis.url(2) if broker_redis else f"{AMQP_HOST}/{vhost}"
    bouncer = None
    if args.pgbouncer:
        bouncer_dir = Path(tempfile.mkdtemp(prefix="kickoff-fleet-pgbouncer-"))  # readable by postgres
        bouncer = PrivatePgbouncer(bouncer_dir, pool_size=args.pgbouncer).start()
    env = dict(os.environ)
    env.update(
        {
            "DATABASE_URL": f"{ADMIN_DB}/{db_name}",
            "REDIS_URL": locks_redis.url(0),
            "REDIS_KEY_PREFIX": f"kickoffbench:{tag}:",
            "BROKER_URL": broker_url,
            "BROKER_NAMESPACE": f"kickoffbench-{tag}",
            "APP_ENV": "develop",
            "DATA_DIR": str(tmp / "data"),
            "LISTENER_SKIP_PROCESSING": "true",
            "LISTENER_HEARTBEAT_INTERVAL_SECONDS": str(args.lifecycle_heartbeat),
            "LISTENER_HEARTBEAT_STALE_SECONDS": str(max(180.0, 6 * args.lifecycle_heartbeat)),
            "LISTENER_READ_TIMEOUT_SECONDS": str(max(30.0, 3 * args.stream_heartbeat)),
            "LISTENER_DB_SLOTS_PER_PROCESS": str(args.db_slots),
            "LISTENER_STREAM_FORMAT": args.format,
            "LISTENER_STREAM_READERS": str(args.readers),
            "LOG_LEVEL": "WARNING",
        }
    )
    if args.db_pool is not None:
        env["DATABASE_POOL_MAX_CONNECTIONS"] = str(args.db_pool)
    else:
        env.pop("DATABASE_POOL_MAX_CONNECTIONS", None)
    os.environ.update(env)

    from config.clock import utcnow
    from models.db import connection_scope, database, init_database, pool_size
    from models.league import League
    from models.match import Match
    from models.migrate import drop_database, migrate

    migrate(env["DATABASE_URL"])
    init_database(env["DATABASE_URL"])
    procs: list[subprocess.Popen[Any]] = []  # simulators
    masters: list[subprocess.Popen[Any]] = []  # Dramatiq masters, each leading its process group
    log = (tmp / "procs.log").open("ab")
    try:
        sr_ids = [str(uuid.uuid4()) for _ in range(total)]
        with connection_scope():
            league = League.create(name="mlb")
            for n in range(0, total, 5000):
                Match.insert_many(
                    [
                        {
                            "id": uuid.uuid4(),
                            "sr_id": sr_id,
                            "league": league,
                            "is_test": True,
                            "scheduled": utcnow(),
                            "title": f"fleet {n + k}",
                        }
                        for k, sr_id in enumerate(sr_ids[n : n + 5000])
                    ]
                ).execute()
        events = int(args.max_seconds / args.event_seconds) + 2
        script = write_games(
            tmp / "games.json",
            sr_ids,
            start_after=args.kickoff_after,
            event_interval=args.event_seconds,
            event_count=events,
            is_test=True,
            spread=args.event_seconds,
        )
        _progress(f"{total:,} matches stored; starting {args.sims} simulators")
        with ThreadPoolExecutor(max_workers=args.sims) as pool:  # each builds every session: in parallel
            sims = list(
                pool.map(
                    lambda _: (
                        start_sim(script, heartbeat_seconds=args.stream_heartbeat, stamp_sends=True),
                        time.monotonic(),  # the simulator listens: its games' clock starts (srsim)
                    ),
                    range(args.sims),
                )
            )
        # the first simulator's games close first: the last event, then "closed" one interval later
        kickoff_at = min(at for _, at in sims) + args.kickoff_after
        games_close_at = kickoff_at + (events - 1) * args.event_seconds + args.event_seconds
        sims = [sim for sim, _ in sims]
        procs.extend(p for p, _ in sims)
        sim_ports = {int(url.rsplit(":", 1)[1]) for _, url in sims}

        for i in range(args.workers):
            wenv = {**env, "SPORTRADAR_BASE_URL": sims[i % len(sims)][1]}
            if bouncer is not None:
                wenv["DATABASE_URL"] = bouncer.url(db_name)
            cmd = [_bin("dramatiq"), "actors", "--processes", "1", "--threads", str(args.listeners)]
            cmd += ["--queues", QUEUE]
            master = subprocess.Popen(
                cmd, env=wenv, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
            masters.append(master)
        workers = [_worker_child(m.pid, args.listeners) for m in masters]
        _progress(f"{args.workers} workers up; dispatching")
        time.sleep(3)
        baseline = [w.memory_info().rss for w in workers]

        import actors  # noqa: F401  the actor runtime of this process, on the environment set above
        from actors.actor_runtime import current
        from actors.listeners import send_start, send_starts
        from lifecycle.dispatch import dispatch_upcoming_match_listeners

        rt = current()
        open_sql = (
            "SELECT count(*), extract(epoch FROM max(now() - heartbeat_at)) FROM match_listener_records "
            "WHERE ended_at IS NULL"
        )
        with PgSampler(db_name) as pg:
            t0 = time.monotonic()
            result = dispatch_upcoming_match_listeners(
                within_minutes=60,
                is_test=True,
                settings=rt.settings,
                coordination=rt.coordination,
                send=send_start,
                send_batch=send_starts,
            )
            tick_s = time.monotonic() - t0
            if result.enqueued != total:
                raise SystemExit(f"the dispatch tick sent {result.enqueued} of {total} starts: {result}")
            deadline = t0 + args.ramp_timeout
            rows = streams = 0
            while time.monotonic() < deadline:
                with connection_scope():
                    rows = int(database.execute_sql(open_sql).fetchone()[0])
                streams = _streams(sim_ports)
                if rows >= total and streams >= total:
                    break
                _progress(f"  {rows:,} open rows, {streams:,} streams")
                time.sleep(1)
            ramp_s = time.monotonic() - t0
            _progress(
                f"tick {tick_s * 1000:.0f} ms; {rows:,} rows and {streams:,} streams after {ramp_s:.1f} s"
            )
            if rows < total or streams < total:
                raise SystemExit(f"after {ramp_s:.0f} s: {rows} open rows and {streams} streams of {total}")
            if args.kickoff_after:
                before = kickoff_at - time.monotonic()
                _progress(
                    f"the games kick off {before:.0f} s after the ramp"
                    if before >= 0
                    else f"the ramp ended {-before:.0f} s after the games kicked off (replays on connect)"
                )
                time.sleep(max(0.0, before))
            time.sleep(args.warmup)

            sim_procs = [psutil.Process(p.pid) for p, _ in sims]
            everyone = workers + sim_procs
            archive = tmp / "data" / "listener" / "mlb"
            cpu0 = [sum(p.cpu_times()[:2]) for p in everyone]
            redis0 = [_redis_commands(locks_redis.url())] + (
                [_redis_commands(broker_url)] if broker_redis else []
            )
            pg0 = _pg_counters(db_name)
            ev0 = _archived_lines(archive)
            window_from = _db_now()
            w0 = time.monotonic()
            # the window measures live games: it ends GAME_END_MARGIN s before the first games close
            # (after that their streams carry heartbeats only)
            window = min(args.window, games_close_at - GAME_END_MARGIN - w0)
            if window <= 0:
                raise SystemExit(
                    f"the simulated games close {games_close_at - w0:.0f} s after the warm-up: no window "
                    "left to measure (raise --max-seconds, or shorten --warmup)"
                )
            if window < args.window:
                _progress(f"the window is cut to {window:.0f} s: the first simulator's games close then")
            ages, counts = [], []
            while time.monotonic() - w0 < window:
                with connection_scope():
                    count, age = database.execute_sql(open_sql).fetchone()
                counts.append(int(count))
                ages.append(float(age or 0))
                time.sleep(1)
            seconds = time.monotonic() - w0
            cpu1 = [sum(p.cpu_times()[:2]) for p in everyone]
            redis1 = [_redis_commands(locks_redis.url())] + (
                [_redis_commands(broker_url)] if broker_redis else []
            )
            pg1 = _pg_counters(db_name)
            ev1 = _archived_lines(archive)
            window_to = _db_now()
            # the actor runtime bound this process's database with the settings' statement timeout
            # (60 s), which a 10,000-listener window's analysis outlasts: it gets the bench's own
            init_database(env["DATABASE_URL"], statement_timeout_seconds=ANALYSIS_TIMEOUT_SECONDS)
            commit = _commit_latency(window_from, window_to)
            ended = _ended_since(window_from)
            log_bytes = _log_bytes()
            rss = [w.memory_info().rss for w in workers]
            sim_rss = [p.memory_info().rss for p in sim_procs]
            peak_pg = pg.peak
        cpu = [100 * (b - a) / seconds for a, b in zip(cpu0, cpu1, strict=True)]
        worker_cpu, sim_cpu = cpu[: len(workers)], cpu[len(workers) :]
        events_s = (ev1 - ev0) / seconds
        heartbeats_s = total / args.stream_heartbeat
        return {
            "workers": args.workers,
            "listeners": args.listeners,
            "total": total,
            "broker": args.broker,
            "sims": args.sims,
            "stream_heartbeat_s": args.stream_heartbeat,
            "stream_format": args.format,
            "stream_readers": args.readers,
            "event_s": args.event_seconds,
            "kickoff_after_s": args.kickoff_after,
            "lifecycle_heartbeat_s": args.lifecycle_heartbeat,
            "db_slots": args.db_slots,
            "db_pool": pool_size(pool_max_connections=args.db_pool, listener_db_concurrency=args.db_slots),
            "pgbouncer_pool": args.pgbouncer,
            "tick_s": tick_s,
            "ramp_s": ramp_s,
            "running_min": min(counts),
            "ended_in_window": ended,
            "window_cut": window < args.window,
            "hb_age_max_s": max(ages),
            "hb_lag_max_s": max(0.0, max(ages) - args.lifecycle_heartbeat),
            "peak_pg_connections": peak_pg,
            "worker_rss_mb": [r / 2**20 for r in rss],
            "worker_baseline_mb": [b / 2**20 for b in baseline],
            "per_listener_kb": sum(r - b for r, b in zip(rss, baseline, strict=True)) / total / 1024,
            "worker_cpu_pct": worker_cpu,
            "sim_rss_mb": [r / 2**20 for r in sim_rss],
            "sim_cpu_pct": sim_cpu,
            "redis_locks_cmds_s": (redis1[0] - redis0[0]) / seconds,
            "redis_broker_cmds_s": (redis1[1] - redis0[1]) / seconds if broker_redis else None,
            "pg_rows_written_s": (pg1[0] - pg0[0]) / seconds,
            "pg_commits_s": (pg1[1] - pg0[1]) / seconds,
            "events_s": events_s,
            **commit,
            "pg_bytes_per_event": log_bytes,
            "running_fraction": min(counts) / total,
            "stream_messages_s": events_s + heartbeats_s,
            "window_s": seconds,
            "load_avg": _load(),
        }
    finally:
        for master in masters:
            if master.poll() is None:
                os.killpg(master.pid, signal.SIGKILL)
                master.wait(10)
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait(10)
        log.close()
        database.close()
        drop_database(env["DATABASE_URL"])
        locks_redis.stop()
        if bouncer is not None:
            bouncer.stop()
            shutil.rmtree(bouncer.workdir, ignore_errors=True)
        if broker_redis:
            broker_redis.stop()
        if args.broker == "amqp":
            _ctl("delete_vhost", vhost)


def report(r: dict[str, Any]) -> None:
    total = r["total"]
    streams = _FORMATS[r.get("stream_format", "sse")]
    print(
        f"fleet: {r['workers']} listener workers x {r['listeners']} listeners = {total:,} live listeners, "
        f"{r['broker']} broker, {r['sims']} simulators; {streams}, heartbeat every "
        f"{r['stream_heartbeat_s']:g} s, an event every {r['event_s']:g} s per game; "
        f"lifecycle heartbeat every {r['lifecycle_heartbeat_s']:g} s"
    )
    readers = r.get("stream_readers", 0)  # a run saved before the readers: a thread per stream
    print(
        f"streams read by {readers} reader threads per worker"
        if readers and r.get("stream_format") == "ndjson"
        else "each stream read by its own thread"
    )
    kickoff = r.get("kickoff_after_s") or 0  # saved runs before the option: at once
    print(
        f"the games kicked off {kickoff:g} s after their simulators listened"
        if kickoff
        else "the games kicked off as their simulators listened (a connect replays the game so far)"
    )
    print(f"load average (1, 5, 15 min) at the end: {r['load_avg']}")
    if r["pgbouncer_pool"]:
        print(f"workers reach PostgreSQL through pgbouncer (transaction mode, pool {r['pgbouncer_pool']})")
    print(f"dispatch tick sending {total:,} starts: {r['tick_s'] * 1000:.0f} ms (goal < 1000 ms)")
    pool = f"a pool of {r['db_pool']}" if r["db_pool"] else "no pool (a new one per use)"
    print(f"each worker: {r['db_slots']} database slots, PostgreSQL connections: {pool}")
    print(
        f"all {total:,} streaming (open row and stream connection each) after {r['ramp_s']:.1f} s "
        f"({total / r['ramp_s']:.0f} starts/s)"
    )
    cut = " (cut: the first games closed then)" if r.get("window_cut") else ""
    print(f"open rows during the {r['window_s']:.0f} s window{cut}: min {r['running_min']:,}")
    for why, n in (r.get("ended_in_window") or {}).items():
        print(f"  runs ended during the window: {n:,} ({why})")
    print(
        f"largest lifecycle heartbeat lag: {r['hb_lag_max_s']:.1f} s "
        f"(oldest heartbeat {r['hb_age_max_s']:.1f} s,"
        f" interval {r['lifecycle_heartbeat_s']:g} s; goal: on time, lag < the interval)"
    )
    print(f"peak PostgreSQL connections: {r['peak_pg_connections']} (goal <= 100)")
    for i, (rss, base, cpu) in enumerate(
        zip(r["worker_rss_mb"], r["worker_baseline_mb"], r["worker_cpu_pct"], strict=True)
    ):
        print(f"  worker {i}: RSS {rss:.0f} MB (idle {base:.0f} MB), CPU {cpu:.1f} % of a core")
    for i, (rss, cpu) in enumerate(zip(r["sim_rss_mb"], r["sim_cpu_pct"], strict=True)):
        print(f"  simulator {i}: RSS {rss:.0f} MB, CPU {cpu:.1f} % of a core")
    workers_cpu = sum(r["worker_cpu_pct"])
    print(
        f"per listener: {r['per_listener_kb']:.0f} KB RSS, {workers_cpu / total * 1000:.2f} m% of a core "
        f"({workers_cpu:.0f} % over all workers); {r['stream_messages_s']:.0f} stream messages/s "
        f"({r['events_s']:.0f} events/s): "
        f"{workers_cpu * 10 / max(r['stream_messages_s'], 1e-9):.3f} ms CPU each"
    )
    broker = f", broker Redis {r['redis_broker_cmds_s']:.0f}" if r["redis_broker_cmds_s"] is not None else ""
    print(f"Redis commands/s: locks Redis {r['redis_locks_cmds_s']:.0f}{broker}")
    print(f"PostgreSQL: {r['pg_rows_written_s']:.0f} rows written/s, {r['pg_commits_s']:.0f} commits/s")
    for prefix, since in (
        ("sent", "message sent (srsim's stamp) to its row committed"),
        ("commit", "message's scheduled send (srsim's lateness counted) to its row committed"),
    ):
        if r.get(f"{prefix}_p99_s") is None:  # saved results before the stamp have no sent_*
            continue
        print(
            f"{since}: p50 {r[f'{prefix}_p50_s']:.3f} s, "
            f"p99 {r[f'{prefix}_p99_s']:.3f} s over {r['commit_rows']:,} live rows"
        )
        by_minute = r.get(f"{prefix}_p99_by_minute_s")
        if by_minute:  # saved results before it have none
            minutes = ", ".join("-" if p99 is None else f"{p99:.2f}" for p99 in by_minute)
            print(f"  its p99 by minute of the window, first to last: {minutes} s")
    if r["pg_bytes_per_event"] is not None:
        print(f"event log in PostgreSQL: {r['pg_bytes_per_event']:,.0f} bytes per event (tables and indexes)")


def main() -> int:
    parser = BENCH.parser()
    parser.add_argument("--workers", type=int, default=10, help="listener worker processes (N)")
    parser.add_argument("--listeners", type=int, default=1000, help="listeners per worker (M, its --threads)")
    parser.add_argument("--broker", choices=("redis", "amqp"), default="redis")
    parser.add_argument(
        "--sims", type=int, default=0, help="simulator processes (default: one per 2,500 streams)"
    )
    parser.add_argument(
        "--stream-heartbeat", type=float, default=5.0, help="seconds between stream heartbeats"
    )
    parser.add_argument(
        "--format",
        choices=tuple(_FORMATS),
        default="ndjson",
        help="LISTENER_STREAM_FORMAT: ndjson (default: the provider's push framing, newline-delimited "
        "JSON over chunked HTTP) or sse (srsim's default; runs saved before this option read SSE)",
    )
    parser.add_argument(
        "--readers",
        type=int,
        default=4,
        help="LISTENER_STREAM_READERS: threads per worker reading its NDJSON streams (0: a thread per "
        "stream, as every run before this option; SSE streams always are)",
    )
    parser.add_argument(
        "--event-seconds", type=float, default=30.0, help="seconds between two events of a game"
    )
    parser.add_argument(
        "--lifecycle-heartbeat", type=float, default=30.0, help="LISTENER_HEARTBEAT_INTERVAL_SECONDS"
    )
    parser.add_argument(
        "--db-slots", type=int, default=4, help="LISTENER_DB_SLOTS_PER_PROCESS of each worker"
    )
    parser.add_argument(
        "--db-pool",
        type=int,
        default=None,
        help="DATABASE_POOL_MAX_CONNECTIONS of each worker (default: db slots + 2, at least 10; 0: no pool)",
    )
    parser.add_argument(
        "--pgbouncer",
        type=int,
        default=0,
        help="workers reach PostgreSQL through a private pgbouncer (pool size)",
    )
    parser.add_argument("--warmup", type=float, default=10.0, help="seconds after the ramp before measuring")
    parser.add_argument("--window", type=float, default=90.0, help="steady window measured (seconds)")
    parser.add_argument(
        "--ramp-timeout", type=float, default=1500.0, help="give up if not all stream by then"
    )
    parser.add_argument("--max-seconds", type=float, default=600.0, help="length of the simulated games")
    parser.add_argument(
        "--kickoff-after",
        type=float,
        default=0.0,
        help="seconds after the simulators listen at which the games kick off (default 0: at once, so "
        "the listeners of a long ramp connect into running games and each gets its game so far "
        "replayed; give more than the ramp to have every listener streaming before kick-off, as the "
        "dispatcher's window does; the warm-up then starts at kick-off)",
    )
    args = parser.parse_args()
    for name in ("kickoff_after", "warmup"):
        if getattr(args, name) < 0:
            parser.error(f"--{name.replace('_', '-')}: seconds, at least 0")
    if args.window <= 0:
        parser.error("--window: seconds, more than 0")
    if not args.sims:
        args.sims = max(1, round(args.workers * args.listeners / 2500))
    with BENCH.output(args), tempfile.TemporaryDirectory() as d:
        result = run(args, Path(d))
        report(result)
        return BENCH.finish(args, result, variant=str(result["total"]))


if __name__ == "__main__":
    threading.stack_size(0)
    sys.exit(main())
