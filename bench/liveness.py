"""Benchmark: the listener workers' liveness signal (lifecycle.liveness), against the alternative.

Run: ``.venv/bin/python bench/liveness.py [--kills 10] [--leases 100,1000,10000] [--json] [--save]``
(under a minute).

* Death seen: a child process holds the signal (a Redis connection subscribed to its lease's
  channel, as a listener worker does) and is SIGKILLed; the seconds from the kill until
  ``PUBSUB NUMSUB`` answers 0, polled every millisecond. Beside it, the alternative the issue
  named: a child holding a PostgreSQL session-level advisory lock on a connection of its own,
  SIGKILLed; the seconds until ``pg_try_advisory_lock`` succeeds from another session. Goal
  (issue 37): the Redis signal ends within 50 ms of the kill (p99).
* Cost: the reaper's one script per step (``judge_worker_leases``: the lease keys and each
  signal) for ``--leases`` leases that all hold their signal; milliseconds per call and Redis's
  own ``used_cpu_sys + used_cpu_user`` per call. A reaper judges only the leases of open rows: one
  per listener worker process (about 1,000 listeners each), so 10,000 listeners are about 10
  leases and 100,000 about 100.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from psycopg2.extensions import make_dsn

from bench._setup import percentile
from bench._verdict import Bench, Goal

BENCH = Bench(
    "liveness",
    __doc__,
    [Goal("redis_death_seen_p99_ms", 50, at_most=True, unit="ms", source="issue 37: death seen at once")],
)

_HOLD_REDIS = """
import sys, time
from models.coordination import CoordinationStore, connect_redis
url, prefix, lease = sys.argv[1:4]
store = CoordinationStore(connect_redis(url), prefix=prefix, url=url)
signal = store.locks.liveness_subscription(lease)
print("held", flush=True)
time.sleep(3600)
"""

_HOLD_PG = """
import sys, time
import psycopg2
conn = psycopg2.connect(sys.argv[1])
conn.autocommit = True
conn.cursor().execute("SELECT pg_advisory_lock(%s)", (int(sys.argv[2]),))
print("held", flush=True)
time.sleep(3600)
"""


def _child(code: str, *args: str) -> subprocess.Popen[str]:
    child = subprocess.Popen([sys.executable, "-c", code, *args], stdout=subprocess.PIPE, text=True)
    assert child.stdout is not None and child.stdout.readline().strip() == "held"
    return child


def redis_death(url: str, prefix: str) -> float:
    """Seconds from SIGKILL to the signal gone (PUBSUB NUMSUB 0)."""
    from models.coordination import CoordinationStore, connect_redis

    store = CoordinationStore(connect_redis(url), prefix=prefix, url=url)
    lease = uuid.uuid4().hex
    child = _child(_HOLD_REDIS, url, prefix, lease)
    channel = store.liveness_channel(lease)
    killed = time.monotonic()
    os.kill(child.pid, signal.SIGKILL)
    while store.client.pubsub_numsub(channel)[0][1] > 0:
        time.sleep(0.001)
    seen = time.monotonic() - killed
    child.wait()
    return seen


def pg_death(dsn: str) -> float:
    """Seconds from SIGKILL to the advisory lock free (pg_try_advisory_lock from another session)."""
    import psycopg2

    key = int.from_bytes(os.urandom(7), "big")
    child = _child(_HOLD_PG, dsn, str(key))
    conn = psycopg2.connect(dsn)
    conn.autocommit = True
    cur = conn.cursor()
    killed = time.monotonic()
    os.kill(child.pid, signal.SIGKILL)
    while True:
        cur.execute("SELECT pg_try_advisory_lock(%s)", (key,))
        if cur.fetchone()[0]:
            break
        time.sleep(0.001)
    seen = time.monotonic() - killed
    cur.execute("SELECT pg_advisory_unlock(%s)", (key,))
    conn.close()
    child.wait()
    return seen


def judge_cost(url: str, prefix: str, n: int, *, calls: int = 50) -> dict[str, float]:
    """Milliseconds per judge_worker_leases call over ``n`` held leases, and Redis CPU ms per call."""
    from models.coordination import CoordinationStore, connect_redis

    store = CoordinationStore(connect_redis(url), prefix=prefix, url=url)
    leases = [uuid.uuid4().hex for _ in range(n)]
    pipe = store.client.pipeline(transaction=False)
    for lease in leases:
        pipe.set(store.worker_lease_key(lease), "s", px=600_000)
    pipe.execute()
    # One connection subscribed to every lease's channel: each counts one subscriber, as if held.
    held = [store.client.pubsub()]
    channels = [store.liveness_channel(lease) for lease in leases]
    for i in range(0, len(channels), 500):
        held[0].subscribe(*channels[i : i + 500])
    while held[0].get_message(timeout=0.5) is not None:
        pass
    store.locks.judge_worker_leases(leases, grace_seconds=0.3, ttl_seconds=8)
    cpu0 = _redis_cpu(store)
    began = time.perf_counter()
    for _ in range(calls):
        store.locks.judge_worker_leases(leases, grace_seconds=0.3, ttl_seconds=8)
    took = (time.perf_counter() - began) / calls * 1000
    cpu = (_redis_cpu(store) - cpu0) / calls * 1000
    for pubsub in held:
        pubsub.close()
    keys = list(store.client.scan_iter(match=f"{prefix}*", count=5000))
    for i in range(0, len(keys), 1000):
        store.client.delete(*keys[i : i + 1000])
    return {"ms_per_call": took, "redis_cpu_ms_per_call": cpu}


def _redis_cpu(store) -> float:
    info = store.client.info("cpu")
    return float(info["used_cpu_sys"]) + float(info["used_cpu_user"])


def main() -> int:
    parser = BENCH.parser()
    parser.add_argument("--kills", type=int, default=10, help="SIGKILLs timed per signal")
    parser.add_argument("--leases", default="10,100,1000", help="lease counts the judge is timed at")
    args = parser.parse_args()
    with BENCH.output(args):
        from config.settings import load_listener_settings

        settings = load_listener_settings(_env_file=None)
        prefix = f"kickoffbench:liveness:{uuid.uuid4().hex[:8]}:"
        # An advisory lock needs a server, not kickoff's tables: the server's maintenance database
        # (DATABASE_URL's own may not be created yet on a fresh machine).
        dsn = make_dsn(settings.database_url, dbname="postgres")
        redis_ms = [redis_death(settings.redis_url, prefix) * 1000 for _ in range(args.kills)]
        pg_ms = [pg_death(dsn) * 1000 for _ in range(args.kills)]
        cost = {n: judge_cost(settings.redis_url, prefix, int(n)) for n in args.leases.split(",")}
        figures = {
            "redis_death_seen_p50_ms": percentile(redis_ms, 50),
            "redis_death_seen_p99_ms": percentile(redis_ms, 99),
            "pg_death_seen_p50_ms": percentile(pg_ms, 50),
            "pg_death_seen_p99_ms": percentile(pg_ms, 99),
            "judge": cost,
        }
        print(
            f"death seen after SIGKILL: Redis signal p50 {figures['redis_death_seen_p50_ms']:.1f} ms, "
            f"p99 {figures['redis_death_seen_p99_ms']:.1f} ms; PostgreSQL advisory lock p50 "
            f"{figures['pg_death_seen_p50_ms']:.1f} ms, p99 {figures['pg_death_seen_p99_ms']:.1f} ms "
            f"({args.kills} kills each)"
        )
        for n, c in cost.items():
            print(
                f"reaper's judge of {n} leases: {c['ms_per_call']:.2f} ms per call, "
                f"Redis CPU {c['redis_cpu_ms_per_call']:.3f} ms per call"
            )
        return BENCH.finish(args, figures)


if __name__ == "__main__":
    sys.exit(main())
