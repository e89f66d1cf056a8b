"""Listener density benchmark: N listeners in ONE process against srsim at 1 event/s each.

The parent starts ``kickoff sim serve`` (a subprocess) with N games sending one event per second
and a stream heartbeat every 5 s, then a worker subprocess that runs N MatchListener bodies, one
thread each, as the listener worker does (record-only, archives on, no database rows). The worker
measures its RSS before and after starting the listeners, its CPU over a steady window, and how
late stream heartbeats were handled (interval between two heartbeats minus the 5 s nominal).
Goals (issue 4): 1000 listeners, <= 1 MB RSS each above the baseline, <= 50 % of one core,
heartbeats on time (p99 of the stream heartbeats' lateness <= 1 s: kickoff's reading of "on
time"), every listener alive; each judged on the worst size of the run.

    .venv/bin/python bench/listener_density.py [--sizes 100,500,1000] [--window 20] [--json] [--save]
"""

from __future__ import annotations

import argparse
import itertools
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

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._setup import density_figures, sample
from bench._srsim import start_sim, write_games
from bench._verdict import DENSITY_GOALS, Bench, Goal

HEARTBEAT_S = 5.0
BENCH = Bench(
    "listener_density",
    __doc__,
    [
        *DENSITY_GOALS,
        Goal("not_alive", 0, at_most=True, unit="listeners", source="issue 4: every listener runs"),
        Goal("hb_lag_p99_ms", 1000, at_most=True, unit="ms", source="issue 4: heartbeats on time"),
    ],
)


def worker(n: int, base_url: str, ids: list[str], data_dir: str, warmup: float, window: float) -> None:
    import psutil

    from config.settings import MatchListenerEnvironment
    from listener.body import ListenerContext
    from listener.match_listener import MatchListener

    class Timed(MatchListener):
        def __init__(self) -> None:
            super().__init__()
            self.beats: list[float] = []

        def _on_heartbeat(self) -> None:
            self.beats.append(time.monotonic())
            super()._on_heartbeat()

    proc = psutil.Process()
    base = MatchListenerEnvironment(
        _env_file=None,
        data_dir=data_dir,
        sportradar_base_url=base_url,
        listener_skip_processing=True,
        listener_sr_url_league="mlb",
        listener_read_timeout_seconds=30,
    )
    threading.stack_size(512 * 1024)
    baseline = proc.memory_info().rss
    bodies, threads, ctxs = [], [], []
    for sr_id in ids[:n]:
        s = base.model_copy(update={"listener_sr_request_match_uuid": sr_id})
        ctx = ListenerContext(match_id="", record_id=None, is_test=False, settings=s)
        body = Timed()
        t = threading.Thread(target=body.run, args=(ctx,), daemon=True)
        t.start()
        bodies.append(body)
        threads.append(t)
        ctxs.append(ctx)
    time.sleep(warmup)
    first = sample(proc, sum(b.stats.events for b in bodies))
    time.sleep(window)
    last = sample(proc, sum(b.stats.events for b in bodies))
    rss = proc.memory_info().rss
    lags = []
    for b in bodies:
        beats = [x for x in b.beats if first.at - HEARTBEAT_S <= x <= last.at]
        lags += [(y - x) - HEARTBEAT_S for x, y in itertools.pairwise(beats)]
    alive = sum(t.is_alive() for t in threads)
    for ctx, body in zip(ctxs, bodies, strict=True):
        ctx.stop_requested.set()
        body.request_stop()
    stop0 = time.monotonic()
    for t in threads:
        t.join(5)
    print(
        json.dumps(
            {
                "n": n,
                "alive": alive,
                **density_figures(n=n, baseline_rss=baseline, rss=rss, first=first, last=last),
                "hb_lag_p50_ms": 1000 * statistics.median(lags) if lags else None,
                "hb_lag_p99_ms": 1000 * sorted(lags)[int(0.99 * (len(lags) - 1))] if lags else None,
                "hb_lag_max_ms": 1000 * max(lags) if lags else None,
                "stop_all_s": time.monotonic() - stop0,
            }
        ),
        flush=True,
    )


def run(n: int, warmup: float, window: float) -> dict:
    ids = [str(uuid.uuid4()) for _ in range(n)]
    with tempfile.TemporaryDirectory() as d:
        # Kick-offs spread over one second: real games' events are not aligned.
        script = write_games(
            Path(d) / "games.json",
            ids,
            start_after=1,
            event_interval=1.0,
            event_count=int(warmup + window + 30),
        )
        sim, base_url = start_sim(script, heartbeat_seconds=HEARTBEAT_S)
        try:
            ids_file = Path(d) / "ids.json"
            ids_file.write_text(json.dumps(ids))
            out = subprocess.run(
                [
                    sys.executable,
                    __file__,
                    "--worker",
                    str(n),
                    "--base-url",
                    base_url,
                    "--ids",
                    str(ids_file),
                    "--data-dir",
                    str(Path(d) / "data"),
                    "--warmup",
                    str(warmup),
                    "--window",
                    str(window),
                ],
                capture_output=True,
                text=True,
                timeout=warmup + window + 120,
            )
            if out.returncode != 0:
                raise SystemExit(out.stderr[-2000:])
            return json.loads(out.stdout.strip().splitlines()[-1])
        finally:
            sim.kill()
            sim.wait(5)


def main() -> int:
    parser = BENCH.parser()
    parser.add_argument("--sizes", default="100,500,1000", help="listener counts, comma-separated")
    parser.add_argument("--warmup", type=float, default=12.0, help="seconds before the measured window")
    parser.add_argument("--window", type=float, default=20.0, help="seconds of the measured window")
    parser.add_argument("--worker", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--base-url", help=argparse.SUPPRESS)
    parser.add_argument("--ids", help=argparse.SUPPRESS)
    parser.add_argument("--data-dir", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        ids = json.loads(Path(args.ids).read_text())
        worker(args.worker, args.base_url, ids, args.data_dir, args.warmup, args.window)
        os._exit(0)
    try:
        sizes = [int(x) for x in args.sizes.split(",")]
    except ValueError:
        parser.error(f"--sizes: comma-separated whole numbers, not {args.sizes!r}")
    if min(sizes) < 1 or args.window <= 0 or args.warmup < 0:
        parser.error("--sizes must be at least 1, --window positive")
    with BENCH.output(args):
        return BENCH.finish(args, measure(sizes, args.warmup, args.window))


def measure(sizes: list[int], warmup: float, window: float) -> dict[str, object]:
    print(f"listener density: N listeners in one process, 1 event/s each, heartbeat {HEARTBEAT_S:.0f} s")
    print(
        f"{'N':>5} {'alive':>5} {'base MB':>8} {'RSS MB':>7} {'KB/listener':>11} {'CPU %':>6} "
        f"{'events/s':>8} {'hb lag p50/p99/max ms':>22} {'stop all s':>10}"
    )
    by_size: dict[str, dict] = {}
    for n in sizes:
        r = run(n, warmup, window)
        by_size[str(n)] = r
        lag = (
            f"{r['hb_lag_p50_ms']:.0f}/{r['hb_lag_p99_ms']:.0f}/{r['hb_lag_max_ms']:.0f}"
            if r["hb_lag_p50_ms"] is not None
            else "-"
        )
        print(
            f"{r['n']:>5} {r['alive']:>5} {r['baseline_mb']:>8.1f} {r['rss_mb']:>7.1f} "
            f"{r['per_listener_kb']:>11.0f} "
            f"{r['cpu_pct']:>6.1f} {r['events_per_s']:>8.0f} {lag:>22} {r['stop_all_s']:>10.2f}"
        )
    rows = by_size.values()
    lags = [r["hb_lag_p99_ms"] for r in rows]
    return {
        "sizes": by_size,
        "largest": max(sizes),
        "per_listener_kb": max(r["per_listener_kb"] for r in rows),
        "cpu_pct": max(r["cpu_pct"] for r in rows),
        "not_alive": sum(r["n"] - r["alive"] for r in rows),
        # no heartbeat seen in the window (a dead stream) is not "on time"
        "hb_lag_p99_ms": None if any(lag is None for lag in lags) else max(lags),
    }


if __name__ == "__main__":
    sys.exit(main())
