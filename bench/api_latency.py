"""API latency: a lineup trigger over HTTP beside the library call, and triggers/s with 32 clients.

Starts `kickoff serve` on a throw-away database and vhost, then
  1. one client: alternates the library call (trigger_lineup in this process) and the same
     trigger over HTTP (keep-alive connection), and prints p50/p99 of each and the difference;
  2. N concurrent clients (default 32 threads, one keep-alive connection each) for a fixed number
     of triggers, and prints triggers/s.
Every trigger is a new action (its own key): transaction, publish, broker confirm, mark. Only a
published trigger counts (HTTP 202 with status ``queued``: the broker confirmed it); a 202
``pending`` (saved for the drain) or an error is counted as unpublished, and fails the run.

With --viewers V (issue 24's load figure) it measures instead, on a board of --board matches (20
of them with a running listener, so the board changes every refresh), half the viewers on the
Matches board (issue 40; --matches-viewers M: M of them):
  1. trigger p50/p99 (one keep-alive client, a trigger every 20 ms) with nothing else running;
  2. PostgreSQL transactions of the bench database (pg_stat_database.xact_commit) over a window
     with one live viewer of each board watched, then with V viewers (operator sessions, full board);
  3. trigger p50/p99 again with the V viewers streaming and --scrapers clients scraping /metrics
     every 15 s; and prints the ratios to the goals (p99 <= 2 x idle; transactions <= 2 x one
     viewer's) with the load average. A viewer whose stream dies, or that receives nothing while
     the loaded triggers run, fails the run (it no longer costs what a viewer costs).

Run: .venv/bin/python bench/api_latency.py [--requests N] [--clients C] [--total T] [--workers W]
     .venv/bin/python bench/api_latency.py --viewers 50 --scrapers 4 --board 5000 [--seconds S]
Goals (issue 14): HTTP p50 within 1.5 ms of the library call; >= 800 triggers/s with 32 clients.
Goals (issue 24): with V viewers and the scrapers, trigger p99 <= 2 x idle p99; the streams'
transactions with V viewers <= 2 x one viewer's.
"""

from __future__ import annotations

import argparse
import http.client
import json
import logging
import sys
import threading
import time
from pathlib import Path
from urllib.parse import urlsplit

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from api.keys import Scope, create_key
from bench._board_load import published
from bench._setup import bench_environment, percentile, serve_api
from bench._verdict import Bench, Goal
from publisher.amqp import AmqpPublisher
from publisher.triggers import LineupRequest, trigger_lineup

BENCH = Bench(
    "api_latency",
    __doc__,
    [
        Goal("unpublished", 0, at_most=True, unit="triggers", source="issue 36: 202 pending is not success"),
        Goal("http_overhead_p50_ms", 1.5, at_most=True, unit="ms", source="issue 14: HTTP p50 - library p50"),
        Goal("triggers_per_s", 800, at_most=False, unit="/s", source="issue 14: published, 32 clients"),
        Goal("p99_ratio", 2, at_most=True, unit="x", source="issue 24: loaded p99 / idle p99 (--viewers)"),
        Goal("tx_ratio", 2, at_most=True, unit="x", source="issue 24: V viewers' transactions / one's"),
        Goal("dead_viewers", 0, at_most=True, unit="viewers", source="issue 36: a dead viewer fails"),
        Goal("tracing_p50_ratio", 1.05, at_most=True, unit="x", source="issue 41: HTTP p50 on / off"),
        Goal("tracing_rate_ratio", 0.95, at_most=False, unit="x", source="issue 41: triggers/s on / off"),
    ],
)
TRIGGER_GOALS = ("http_overhead_p50_ms", "triggers_per_s")
VIEWER_GOALS = ("p99_ratio", "tx_ratio", "dead_viewers")
TRACING_GOALS = ("tracing_p50_ratio", "tracing_rate_ratio")
#: Part of every idempotency key of one load run (--tracing runs several).
_TAG = ""


def _body(i: int, tag: str) -> dict[str, object]:
    return {
        "league_id": "L1",
        "team_id": "7",
        "swaps": [{"player_id": 1000 + i, "to_slot": "BE"}],
        "idempotency_key": f"lineup-7-{_TAG}{tag}-{i}",
    }


def _one_client(url: str, key: str, settings: object, requests: int) -> dict[str, float]:
    """Alternating library call and HTTP: p50/p99 of each (published ones), the difference."""
    lib: list[float] = []
    over_http: list[float] = []
    unpublished = 0
    # http.client: the thinnest keep-alive client, so the difference is the server's, not the client's
    conn = http.client.HTTPConnection(urlsplit(url).hostname, urlsplit(url).port, timeout=60)
    headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}
    with AmqpPublisher(url=settings.amqp_url) as publisher:
        for i in range(requests + 20):
            body = _body(i, "lib")
            request = LineupRequest(
                league_id=body["league_id"],
                team_id=body["team_id"],
                swaps=body["swaps"],
                idempotency_key=body["idempotency_key"],
            )
            start = time.perf_counter()
            result = trigger_lineup(request, publisher=publisher, settings=settings)
            lib_ms = (time.perf_counter() - start) * 1000
            start = time.perf_counter()
            conn.request("POST", "/v1/trigger/lineup", body=json.dumps(_body(i, "http")), headers=headers)
            answer = conn.getresponse()
            text = answer.read()
            http_ms = (time.perf_counter() - start) * 1000
            if i < 20:  # warm-up
                continue
            if result.published:
                lib.append(lib_ms)
            else:
                unpublished += 1
            if published(answer.status, text):
                over_http.append(http_ms)
            else:
                unpublished += 1
    conn.close()
    if not lib or not over_http:
        return {"one_client_unpublished": unpublished}
    p50_lib, p50_http = percentile(lib, 50), percentile(over_http, 50)
    print(f"one client, {requests} requests each (alternating):")
    print(f"  library call: p50 {p50_lib:.2f} ms   p99 {percentile(lib, 99):.2f} ms")
    print(f"  HTTP:         p50 {p50_http:.2f} ms   p99 {percentile(over_http, 99):.2f} ms")
    print(f"  HTTP p50 - library p50: {p50_http - p50_lib:+.2f} ms; unpublished {unpublished}")
    return {
        "library_p50_ms": p50_lib,
        "library_p99_ms": percentile(lib, 99),
        "http_p50_ms": p50_http,
        "http_p99_ms": percentile(over_http, 99),
        "http_overhead_p50_ms": p50_http - p50_lib,
        "one_client_unpublished": unpublished,
    }


def _many_clients(url: str, key: str, clients: int, total: int) -> dict[str, float]:
    """``clients`` threads, each with its own keep-alive http.client connection, share ``total``
    triggers: published triggers per second."""
    counter = iter(range(total))
    lock = threading.Lock()
    failures: list[str] = []
    headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}
    parts = urlsplit(url)

    def worker() -> None:
        conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=60)
        while True:
            with lock:
                i = next(counter, None)
            if i is None:
                break
            conn.request("POST", "/v1/trigger/lineup", body=json.dumps(_body(i, "load")), headers=headers)
            answer = conn.getresponse()
            text = answer.read()
            if not published(answer.status, text):
                failures.append(f"{answer.status} {text[:120]!r}")
        conn.close()

    threads = [threading.Thread(target=worker) for _ in range(clients)]
    start = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - start
    done = total - len(failures)
    print(
        f"{clients} concurrent clients, {total} triggers: {done / elapsed:.0f} published triggers/s ", end=""
    )
    print(f"({elapsed:.1f} s, {len(failures)} not published)")
    for answer in sorted(set(failures))[:5]:
        print(f"  not published: {failures.count(answer)} x {answer}")
    return {
        "clients": clients,
        "total": total,
        "triggers_per_s": done / elapsed,
        "load_unpublished": len(failures),
    }


def main() -> int:
    parser = BENCH.parser()
    parser.add_argument("--requests", type=int, default=500, help="Requests of the one-client run.")
    parser.add_argument("--clients", type=int, default=32, help="Concurrent clients of the load run.")
    parser.add_argument("--total", type=int, default=4000, help="Triggers of the load run.")
    parser.add_argument("--workers", type=int, default=1, help="uvicorn worker processes of kickoff serve.")
    parser.add_argument("--viewers", type=int, default=0, help="Live board viewers (0: the trigger runs).")
    parser.add_argument("--scrapers", type=int, default=4, help="/metrics scrapers, every 15 s each.")
    parser.add_argument("--board", type=int, default=5000, help="Matches on the board.")
    parser.add_argument("--seconds", type=float, default=45.0, help="Length of each measured window.")
    parser.add_argument(
        "--tracing",
        action="store_true",
        help="Issue 41: the trigger with tracing off and on (an OTLP exporter whose collector is "
        "unreachable: spans dropped), in turns; judged on the on/off ratios of HTTP p50 and triggers/s.",
    )
    parser.add_argument(
        "--matches-viewers",
        type=int,
        default=None,
        help="Of the viewers, how many watch the Matches board (default: half of them).",
    )
    args = parser.parse_args()
    for name in ("requests", "clients", "total", "workers", "board"):
        if getattr(args, name) < 1:
            parser.error(f"--{name} must be at least 1")
    if args.viewers < 0 or args.scrapers < 0 or args.seconds <= 0 or args.board < 20:
        parser.error("--viewers and --scrapers must be >= 0, --seconds positive, --board at least 20")
    if args.matches_viewers is not None and not 0 <= args.matches_viewers <= args.viewers:
        parser.error("--matches-viewers must be between 0 and --viewers")
    logging.basicConfig(level=logging.WARNING)
    with BENCH.output(args):
        if args.tracing:
            figures = _tracing_overhead(args)
            skipped = ("unpublished", *TRIGGER_GOALS, *VIEWER_GOALS)
            return BENCH.finish(args, figures, variant="tracing", skipped=skipped)
        figures = measure(args)
        skipped = (*(TRIGGER_GOALS if args.viewers else VIEWER_GOALS), *TRACING_GOALS)
        return BENCH.finish(args, figures, variant="viewers" if args.viewers else "", skipped=skipped)


def measure(args: argparse.Namespace) -> dict[str, object]:
    with bench_environment() as settings:
        _, key = create_key(name="bench", scope=Scope.TRIGGER)
        proc, url = serve_api(
            {"DATABASE_URL": settings.database_url, "AMQP_URL": settings.amqp_url, "LOG_LEVEL": "WARNING"},
            workers=args.workers,
        )
        try:
            print(f"kickoff serve --workers {args.workers} at {url}")
            if args.viewers:
                from bench._board_load import board_load

                return board_load(
                    url,
                    key,
                    settings,
                    viewers=args.viewers,
                    scrapers=args.scrapers,
                    board=args.board,
                    seconds=args.seconds,
                    body=_body,
                    matches_viewers=(
                        args.viewers // 2 if args.matches_viewers is None else args.matches_viewers
                    ),
                )
            one = _one_client(url, key, settings, args.requests)
            many = _many_clients(url, key, args.clients, args.total)
            return {
                **one,
                **many,
                "workers": args.workers,
                "unpublished": one["one_client_unpublished"] + many["load_unpublished"],
            }
        finally:
            proc.terminate()
            proc.wait(timeout=30)


def _tracing_overhead(args: argparse.Namespace) -> dict[str, object]:
    """Issue 41's figures: the trigger's HTTP p50 and triggers/s with tracing off and on.

    Both servers run at once and take turns (one client alternates its requests between them; the
    load runs alternate rounds), so a busy machine weighs on both alike.
    """
    global _TAG
    from bench._setup import tracing_env

    with bench_environment() as settings:
        _, key = create_key(name="bench", scope=Scope.TRIGGER)
        base = {"DATABASE_URL": settings.database_url, "AMQP_URL": settings.amqp_url, "LOG_LEVEL": "WARNING"}
        servers = {mode: serve_api({**base, **tracing_env(mode == "on")}) for mode in ("off", "on")}
        try:
            headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}
            conns = {
                m: http.client.HTTPConnection(urlsplit(u).hostname, urlsplit(u).port)
                for m, (_, u) in servers.items()
            }
            times: dict[str, list[float]] = {"off": [], "on": []}
            for i in range(args.requests + 20):
                for mode, conn in conns.items():
                    start = time.perf_counter()
                    conn.request(
                        "POST", "/v1/trigger/lineup", body=json.dumps(_body(i, f"1{mode}")), headers=headers
                    )
                    answer = conn.getresponse()
                    text = answer.read()
                    if answer.status != 202:
                        raise SystemExit(
                            f"tracing {mode}: a trigger answered {answer.status}: {text[:200]!r}"
                        )
                    if i >= 20:
                        times[mode].append((time.perf_counter() - start) * 1000)
            rates: dict[str, list[float]] = {"off": [], "on": []}
            for round_ in range(4):
                for mode, (_, url) in servers.items():
                    _TAG = f"r{round_}{mode}"
                    load = _many_clients(url, key, args.clients, args.total // 4)
                    rates[mode].append(load["triggers_per_s"])
        finally:
            for proc, _ in servers.values():
                proc.terminate()
                proc.wait(timeout=30)
    p50 = {m: percentile(t, 50) for m, t in times.items()}
    rate = {m: sum(r) / len(r) for m, r in rates.items()}
    print(f"tracing on / off: HTTP p50 {p50['on']:.2f} / {p50['off']:.2f} ms")
    print(f"tracing on / off: {rate['on']:.0f} / {rate['off']:.0f} published triggers/s")
    return {
        "http_p50_ms_by_tracing": p50,
        "triggers_per_s_by_tracing": rate,
        "tracing_p50_ratio": p50["on"] / p50["off"],
        "tracing_rate_ratio": rate["on"] / rate["off"],
    }


if __name__ == "__main__":
    sys.exit(main())
