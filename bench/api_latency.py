"""API latency: a lineup trigger over HTTP beside the library call, and triggers/s with 32 clients.

Starts `kickoff serve` on a throw-away database and vhost, then
  1. one client: alternates the library call (trigger_lineup in this process) and the same
     trigger over HTTP (keep-alive connection), and prints p50/p99 of each and the difference;
  2. N concurrent clients (default 32 threads, one keep-alive connection each) for a fixed number
     of triggers, and prints triggers/s.
Every trigger is a new action (its own key): transaction, publish, broker confirm, mark.

With --viewers V (issue 24's load figure) it measures instead, on a board of --board matches (20
of them with a running listener, so the board changes every refresh), half the viewers on the
Matches board (issue 40; --matches-viewers M: M of them):
  1. trigger p50/p99 (one keep-alive client, a trigger every 20 ms) with nothing else running;
  2. PostgreSQL transactions of the bench database (pg_stat_database.xact_commit) over a window
     with one live viewer of each board watched, then with V viewers (operator sessions, full board);
  3. trigger p50/p99 again with the V viewers streaming and --scrapers clients scraping /metrics
     every 15 s; and prints the ratios to the goals (p99 <= 2 x idle; transactions <= 2 x one
     viewer's) with the load average.

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
from bench._setup import bench_environment, percentile, serve_api
from publisher.amqp import AmqpPublisher
from publisher.triggers import LineupRequest, trigger_lineup


def _body(i: int, tag: str) -> dict[str, object]:
    return {
        "league_id": "L1",
        "team_id": "7",
        "swaps": [{"player_id": 1000 + i, "to_slot": "BE"}],
        "idempotency_key": f"lineup-7-{tag}-{i}",
    }


def _one_client(url: str, key: str, settings: object, requests: int) -> None:
    lib: list[float] = []
    over_http: list[float] = []
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
            trigger_lineup(request, publisher=publisher, settings=settings)
            lib_ms = (time.perf_counter() - start) * 1000
            start = time.perf_counter()
            conn.request("POST", "/v1/trigger/lineup", body=json.dumps(_body(i, "http")), headers=headers)
            answer = conn.getresponse()
            text = answer.read()
            http_ms = (time.perf_counter() - start) * 1000
            assert answer.status == 202, text
            if i >= 20:  # warm-up
                lib.append(lib_ms)
                over_http.append(http_ms)
    conn.close()
    p50_lib, p50_http = percentile(lib, 50), percentile(over_http, 50)
    print(f"one client, {requests} requests each (alternating):")
    print(f"  library call: p50 {p50_lib:.2f} ms   p99 {percentile(lib, 99):.2f} ms")
    print(f"  HTTP:         p50 {p50_http:.2f} ms   p99 {percentile(over_http, 99):.2f} ms")
    print(f"  HTTP p50 - library p50: {p50_http - p50_lib:+.2f} ms (goal: within 1.5 ms)")


def _many_clients(url: str, key: str, clients: int, total: int) -> None:
    """``clients`` threads, each with its own keep-alive http.client connection, share ``total`` triggers."""
    counter = iter(range(total))
    lock = threading.Lock()
    failures: list[int] = []
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
            answer.read()
            if answer.status != 202:
                failures.append(answer.status)
        conn.close()

    threads = [threading.Thread(target=worker) for _ in range(clients)]
    start = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - start
    print(f"{clients} concurrent clients, {total} triggers: {total / elapsed:.0f} triggers/s ", end="")
    print(f"({elapsed:.1f} s, {len(failures)} not 202; goal: >= 800/s)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=500, help="Requests of the one-client run.")
    parser.add_argument("--clients", type=int, default=32, help="Concurrent clients of the load run.")
    parser.add_argument("--total", type=int, default=4000, help="Triggers of the load run.")
    parser.add_argument("--workers", type=int, default=1, help="uvicorn worker processes of kickoff serve.")
    parser.add_argument("--viewers", type=int, default=0, help="Live board viewers (0: the trigger runs).")
    parser.add_argument("--scrapers", type=int, default=4, help="/metrics scrapers, every 15 s each.")
    parser.add_argument("--board", type=int, default=5000, help="Matches on the board.")
    parser.add_argument("--seconds", type=float, default=45.0, help="Length of each measured window.")
    parser.add_argument(
        "--matches-viewers",
        type=int,
        default=None,
        help="Of the viewers, how many watch the Matches board (default: half of them).",
    )
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
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

                board_load(
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
            else:
                _one_client(url, key, settings, args.requests)
                _many_clients(url, key, args.clients, args.total)
        finally:
            proc.terminate()
            proc.wait(timeout=30)


if __name__ == "__main__":
    main()
