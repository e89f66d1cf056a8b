"""Launcher benchmark: runs/second from publish to process start (no-op jobs, cap 8) and the
launcher's added latency per run, against a bare subprocess baseline.

Run: .venv/bin/python bench/launcher.py [--runs 200] [--cap 8] [--single 30] [--json] [--save]

Goals (kickoff's own; issue 5 asked for the figures, not a bound, and docs/runs.md says the
throughput is bound by starting processes, not by the launcher): the burst at >= 0.8 x a bare
Popen pool at the same cap, and <= 50 ms added per run over a bare Popen (median).

Uses a throw-away PostgreSQL database and RabbitMQ vhost (created and dropped here) on the
DATABASE_URL / AMQP_URL servers; nothing else is touched.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._verdict import Bench, Goal
from config.settings import load_settings
from models.db import database, init_database
from models.migrate import drop_database, migrate
from publisher.amqp import AmqpPublisher
from publisher.queues import JOB_RUNS
from runs.catalog import load_catalog
from runs.launcher import Launcher, LauncherConfig
from runs.publish import publish_run

OWN_GOAL = "kickoff's own (docs/runs.md: bound by process starts, not the launcher)"
BENCH = Bench(
    "launcher",
    __doc__,
    [
        Goal("ratio_bare_pool", 0.8, at_most=False, unit="x", source=OWN_GOAL),
        Goal("added_latency_ms", 50, at_most=True, unit="ms", source=OWN_GOAL),
    ],
)


def rabbitmqctl(*args: str) -> None:
    subprocess.run(["rabbitmqctl", "-q", *args], check=True, capture_output=True, timeout=60)


def with_path(url: str, path: str) -> str:
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path="/" + path))


def traces(trace_dir: Path) -> dict[str, dict]:
    out = {}
    for p in trace_dir.glob("*.json"):
        t = json.loads(p.read_text())
        out[t["run_id"]] = t
    return out


def wait_for(trace_dir: Path, count: int, timeout: float = 300.0) -> None:
    end = time.monotonic() + timeout
    while len(list(trace_dir.glob("*.json"))) < count:
        if time.monotonic() > end:
            raise SystemExit(f"timed out: {len(list(trace_dir.glob('*.json')))} of {count} runs started")
        time.sleep(0.005)


def baseline_single(argv: list[str], trace_dir: Path, n: int) -> list[float]:
    """Bare Popen -> job start, one at a time (what starting the process costs anyway)."""
    lat = []
    for _ in range(n):
        run_id = str(uuid.uuid4())
        env = {
            **os.environ,
            "RUN_ID": run_id,
            "RUN_ATTEMPT": "1",
            "RUN_TRACE_DIR": str(trace_dir),
        }
        t0 = time.time()
        subprocess.Popen(argv, env=env).wait()
        lat.append(traces(trace_dir)[run_id]["start"] - t0)
    return lat


def baseline_burst(argv: list[str], trace_dir: Path, n: int, cap: int) -> float:
    """Bare Popen pool at ``cap``: runs/second from first spawn to last job start."""
    t0 = time.time()
    running: list[subprocess.Popen] = []
    for _ in range(n):
        while len(running) >= cap:
            running = [p for p in running if p.poll() is None]
            time.sleep(0.001)
        env = {
            **os.environ,
            "RUN_ID": str(uuid.uuid4()),
            "RUN_ATTEMPT": "1",
            "RUN_TRACE_DIR": str(trace_dir),
        }
        running.append(subprocess.Popen(argv, env=env))
    for p in running:
        p.wait()
    last = max(t["start"] for t in traces(trace_dir).values())
    return n / (last - t0)


def main() -> int:
    parser = BENCH.parser()
    parser.add_argument("--runs", type=int, default=200, help="runs in the burst")
    parser.add_argument("--cap", type=int, default=8, help="launcher cap")
    parser.add_argument("--single", type=int, default=30, help="one-at-a-time runs for the latency figure")
    args = parser.parse_args()
    for name in ("runs", "cap", "single"):
        if getattr(args, name) < 2:
            parser.error(f"--{name} must be at least 2")
    with BENCH.output(args):
        return BENCH.finish(args, measure(args))


def measure(args: argparse.Namespace) -> dict[str, float]:
    settings = load_settings()
    tag = uuid.uuid4().hex[:8]
    db_url = with_path(settings.database_url, f"kickoff_bench_{tag}")
    vhost = f"kickoff_bench_{tag}"
    amqp_url = with_path(settings.amqp_url, vhost)
    rabbitmqctl("add_vhost", vhost)
    rabbitmqctl("set_permissions", "-p", vhost, "guest", ".*", ".*", ".*")
    migrate(db_url)
    init_database(db_url)
    catalog = load_catalog(settings.job_catalog_path)
    argv = catalog.job("noop").argv()
    tmp = Path(tempfile.mkdtemp(prefix="kickoff-bench-"))
    run_dir = tmp / "runs-traces"  # RUN_TRACE_DIR of the launcher's job processes
    run_dir.mkdir()
    try:
        with AmqpPublisher(url=amqp_url) as admin:
            admin.declare_durable([JOB_RUNS])
        launcher = Launcher(
            catalog=catalog,
            publisher=AmqpPublisher(url=amqp_url),
            data_dir=tmp / "data",
            amqp_url=amqp_url,
            config=LauncherConfig.from_settings(
                settings, cap=args.cap, prefetch=200, poll_seconds=0.002, drain_interval_seconds=5.0
            ),
            job_env={**os.environ, "RUN_TRACE_DIR": str(run_dir)},
        )
        thread = threading.Thread(target=launcher.run, kwargs={"install_signals": False}, daemon=True)
        thread.start()
        publisher = AmqpPublisher(url=amqp_url)

        # 1. one run at a time: publish -> job process start
        single_dir = run_dir
        lat_launcher = []
        for i in range(args.single):
            t0 = time.time()
            r = publish_run("noop", {}, trigger="cli", catalog=catalog, publisher=publisher)
            wait_for(single_dir, i + 1)
            lat_launcher.append(traces(single_dir)[r.run_id]["start"] - t0)
        base_dir = tmp / "base"
        base_dir.mkdir()
        lat_base = baseline_single(argv, base_dir, args.single)

        # 2. the burst: N runs published back to back, cap C
        burst_dir = run_dir
        t0 = time.time()
        publish_times = {}
        for _ in range(args.runs):
            r = publish_run("noop", {}, trigger="cli", catalog=catalog, publisher=publisher)
            publish_times[r.run_id] = time.time()
        t_published = time.time()
        wait_for(burst_dir, args.single + args.runs)
        burst = {k: t for k, t in traces(burst_dir).items() if k in publish_times}
        last_start = max(t["start"] for t in burst.values())
        rate = args.runs / (last_start - t0)
        waits = [burst[k]["start"] - publish_times[k] for k in burst]
        launcher.request_stop()
        thread.join(timeout=60)
        publisher.close()

        pool_dir = tmp / "pool"
        pool_dir.mkdir()
        pool_rate = baseline_burst(argv, pool_dir, args.runs, args.cap)

        med_l, med_b = statistics.median(lat_launcher), statistics.median(lat_base)
        print(f"kickoff launcher benchmark ({args.runs} no-op runs, cap {args.cap}, {os.cpu_count()} CPUs)")
        print(f"  publish rate (publish_run, confirmed):  {args.runs / (t_published - t0):8.1f} runs/s")
        print(f"  burst: publish -> process start:        {rate:8.1f} runs/s")
        print(f"  bare Popen pool at cap {args.cap}:             {pool_rate:8.1f} runs/s")
        print(f"  ratio launcher / bare pool:             {rate / pool_rate:8.2f}")
        print(
            f"  burst wait publish -> start: median {statistics.median(waits) * 1000:.0f} ms, "
            f"max {max(waits) * 1000:.0f} ms"
        )
        print(
            f"  single run publish -> start: median {med_l * 1000:.1f} ms "
            f"(p90 {statistics.quantiles(lat_launcher, n=10)[-1] * 1000:.1f} ms)"
        )
        print(f"  bare Popen -> start:         median {med_b * 1000:.1f} ms")
        print(
            f"  launcher's added latency per run: {(med_l - med_b) * 1000:.1f} ms "
            f"(publish, confirm, delivery, check+ack, claim, sh wrapper)"
        )
        print(
            f"  max ack time (delivery -> ack): {max(launcher.stats.ack_seconds) * 1000:.1f} ms; "
            f"max running {launcher.stats.max_running}"
        )
        return {
            "runs": args.runs,
            "cap": args.cap,
            "publish_runs_per_s": args.runs / (t_published - t0),
            "burst_runs_per_s": rate,
            "bare_pool_runs_per_s": pool_rate,
            "ratio_bare_pool": rate / pool_rate,
            "burst_wait_median_ms": statistics.median(waits) * 1000,
            "burst_wait_max_ms": max(waits) * 1000,
            "single_median_ms": med_l * 1000,
            "bare_popen_median_ms": med_b * 1000,
            "added_latency_ms": (med_l - med_b) * 1000,
            "max_ack_ms": max(launcher.stats.ack_seconds) * 1000,
            "max_running": launcher.stats.max_running,
        }
    finally:
        database.close()
        drop_database(db_url)
        rabbitmqctl("delete_vhost", vhost)


if __name__ == "__main__":
    sys.exit(main())
