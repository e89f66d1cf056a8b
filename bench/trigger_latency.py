"""Trigger latency: p50/p99 of one lineup trigger (transaction + publish + broker confirm + mark).

Run: .venv/bin/python bench/trigger_latency.py [--requests N] [--json] [--save]
Goals (kickoff's own: no issue states one; the docs quote p50 about 5 ms, p99 about 14 ms on the
2-core box): every trigger published (confirmed by the broker and marked), p50 <= 10 ms,
p99 <= 30 ms.
"""

from __future__ import annotations

import logging
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._setup import bench_environment, percentile
from bench._verdict import Bench, Goal
from publisher.amqp import AmqpPublisher
from publisher.triggers import LineupRequest, trigger_lineup

OWN_GOAL = "kickoff's own (no issue states one)"
BENCH = Bench(
    "trigger_latency",
    __doc__,
    [
        Goal("unpublished", 0, at_most=True, unit="triggers", source="every trigger confirmed"),
        Goal("p50_ms", 10, at_most=True, unit="ms", source=OWN_GOAL),
        Goal("p99_ms", 30, at_most=True, unit="ms", source=OWN_GOAL),
    ],
)
WARM_UP = 20


def measure(requests: int) -> dict[str, float]:
    with bench_environment() as settings, AmqpPublisher(url=settings.amqp_url) as publisher:
        timings: list[float] = []
        unpublished = 0
        for i in range(requests + WARM_UP):
            request = LineupRequest(
                league_id="L1",
                team_id="7",
                swaps=[{"player_id": 1000 + i, "to_slot": "BE"}],
                idempotency_key=f"lineup-7-bench-{i}",
            )
            start = time.perf_counter()
            result = trigger_lineup(request, publisher=publisher, settings=settings)
            elapsed = time.perf_counter() - start
            if i >= WARM_UP:
                timings.append(elapsed * 1000)
                unpublished += not result.published
    figures = {
        "requests": requests,
        "unpublished": unpublished,
        "p50_ms": percentile(timings, 50),
        "p99_ms": percentile(timings, 99),
        "max_ms": max(timings),
        "mean_ms": sum(timings) / len(timings),
    }
    print(f"requests: {requests} (each: insert action + outbox row, commit, publish, confirm, mark)")
    print(
        f"p50: {figures['p50_ms']:.2f} ms   p99: {figures['p99_ms']:.2f} ms   "
        f"max: {figures['max_ms']:.2f} ms   mean: {figures['mean_ms']:.2f} ms   unpublished: {unpublished}"
    )
    return figures


def main() -> int:
    parser = BENCH.parser()
    parser.add_argument("--requests", type=int, default=1000, help="timed triggers (after 20 warm-up ones)")
    args = parser.parse_args()
    if args.requests < 1:
        parser.error("--requests must be at least 1")
    logging.basicConfig(level=logging.WARNING)
    with BENCH.output(args):
        return BENCH.finish(args, measure(args.requests))


if __name__ == "__main__":
    sys.exit(main())
