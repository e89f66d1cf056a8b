"""Trigger latency: p50/p99 of one lineup trigger (transaction + publish + broker confirm + mark).

Run: .venv/bin/python bench/trigger_latency.py [--requests N]
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._setup import bench_environment, percentile
from publisher.amqp import AmqpPublisher
from publisher.triggers import LineupRequest, trigger_lineup


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=1000)
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    with bench_environment() as settings, AmqpPublisher(url=settings.amqp_url) as publisher:
        timings: list[float] = []
        for i in range(args.requests + 20):
            request = LineupRequest(
                league_id="L1",
                team_id="7",
                swaps=[{"player_id": 1000 + i, "to_slot": "BE"}],
                idempotency_key=f"lineup-7-bench-{i}",
            )
            start = time.perf_counter()
            result = trigger_lineup(request, publisher=publisher, settings=settings)
            elapsed = time.perf_counter() - start
            assert result.published, result
            if i >= 20:  # warm-up
                timings.append(elapsed * 1000)
        print(f"requests: {args.requests} (each: insert action + outbox row, commit, publish, confirm, mark)")
        print(
            f"p50: {percentile(timings, 50):.2f} ms   p99: {percentile(timings, 99):.2f} ms   "
            f"max: {max(timings):.2f} ms   mean: {sum(timings) / len(timings):.2f} ms"
        )


if __name__ == "__main__":
    main()
