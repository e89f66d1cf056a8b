"""Drain throughput: the outbox drain (batched publishes, pipelined confirms, one UPDATE per batch)
against plain pika publishing the same messages, in the same run: one confirm at a time, and
without confirms at all (fire and forget: the ceiling of what pika alone can push).

The same run also drains the same messages with the publisher of ``--legacy-ref`` (default: the
last commit whose publisher pipelined confirms on pika's private API, publisher/pika_compat.py),
loaded from git into this process only for the comparison; ``--legacy-ref ''`` skips it. Each
publisher drains ``--rounds`` times, alternating which goes first; the medians are printed.

Run: .venv/bin/python bench/drain_throughput.py [--messages N] [--batch B]
Goals: drain >= 12,000 msg/s on a 2-core machine, >= 2.5x one-confirm-at-a-time pika and
>= 0.8x unconfirmed pika.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import pika

from bench._setup import LEGACY_REF, bench_environment, module_at, purge
from config.settings import KickoffSettings
from models.db import database
from publisher.drain import drain_outbox_concurrently


def fill_outbox(n: int) -> None:
    with database.atomic():
        database.execute_sql(
            "INSERT INTO outbox_messages (message_id, queue, body, headers, next_attempt_at) "
            "SELECT gen_random_uuid(), 'lineup_updates', jsonb_build_object("
            "'tracking_id', gen_random_uuid(), 'league_id', 'L1', 'team_id', '7', 'swaps', "
            "jsonb_build_array(jsonb_build_object('player_id', i, 'to_slot', 'BE')), 'traceparent', NULL, "
            "'created_at', now()), '{}'::jsonb, now() - interval '1 second' FROM generate_series(1, %s) AS i",
            (n,),
        )


def plain_pika(url: str, n: int, *, confirms: bool) -> float:
    """Plain pika, one basic_publish per message: messages/second.

    With ``confirms`` the channel is in confirm mode (each publish waits for its confirm).
    Without, nothing is awaited but one passive declare after the loop: a round trip on the same
    channel, so the broker has processed every publish before the clock stops.
    """
    rows = database.execute_sql(
        "SELECT message_id, body FROM outbox_messages ORDER BY id LIMIT %s", (n,)
    ).fetchall()
    conn = pika.BlockingConnection(pika.URLParameters(url))
    channel = conn.channel()
    if confirms:
        channel.confirm_delivery()
    start = time.perf_counter()
    for message_id, body in rows:
        channel.basic_publish(
            exchange="",
            routing_key="lineup_updates",
            body=json.dumps(body, separators=(",", ":")).encode(),
            properties=pika.BasicProperties(
                content_type="application/json", delivery_mode=2, message_id=str(message_id)
            ),
            mandatory=True,
        )
    if not confirms:
        channel.queue_declare(queue="lineup_updates", passive=True)
    elapsed = time.perf_counter() - start
    conn.close()
    return n / elapsed


def legacy_publisher_factory(ref: str, settings: object) -> Callable[[], object]:
    """A factory of ``ref``'s AmqpPublisher (pika's private API), for the comparison only."""
    compat = module_at(ref, "publisher/pika_compat.py", "bench_legacy_pika_compat")
    legacy = module_at(
        ref,
        "publisher/amqp.py",
        "bench_legacy_amqp",
        replace={"from publisher import pika_compat": "import bench_legacy_pika_compat as pika_compat"},
    )
    assert legacy.pika_compat is compat
    return lambda: legacy.publisher_from_settings(settings)


def timed_drain(settings: object, messages: int, workers: int, factory: Callable[[], object] | None):
    start = time.perf_counter()
    report = drain_outbox_concurrently(settings=settings, workers=workers, publisher_factory=factory)
    elapsed = time.perf_counter() - start
    assert report.published == messages, report
    return messages / elapsed, elapsed, report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=20_000)
    parser.add_argument(
        "--batch",
        type=int,
        default=KickoffSettings.model_fields["outbox_batch_size"].default,
        help="rows per batch (default: OUTBOX_BATCH_SIZE's default)",
    )
    parser.add_argument("--workers", type=int, default=2, help="drains side by side (OUTBOX_DRAIN_WORKERS)")
    parser.add_argument("--rounds", type=int, default=3, help="drains of each publisher (median printed)")
    parser.add_argument(
        "--legacy-ref", default=LEGACY_REF, help="git ref whose publisher runs beside ('' to skip)"
    )
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    with bench_environment(outbox_batch_size=args.batch, outbox_drain_max_seconds=600) as settings:
        legacy = legacy_publisher_factory(args.legacy_ref, settings) if args.legacy_ref else None
        fill_outbox(args.messages)
        base = plain_pika(settings.amqp_url, args.messages, confirms=True)
        purge(settings.amqp_url)
        ceiling = plain_pika(settings.amqp_url, args.messages, confirms=False)
        purge(settings.amqp_url)
        new_runs: list[tuple[float, float, object]] = []
        old_runs: list[tuple[float, float, object]] = []
        filled = True  # the rows plain_pika read are still pending: the first drain takes them
        for n in range(args.rounds):  # alternating which goes first: both see the same machine
            order = [(new_runs, None)] + ([(old_runs, legacy)] if legacy is not None else [])
            for runs, factory in order if n % 2 == 0 else order[::-1]:
                if not filled:
                    fill_outbox(args.messages)
                runs.append(timed_drain(settings, args.messages, args.workers, factory))
                filled = False
                purge(settings.amqp_url)
        drain_rate, elapsed, report = sorted(new_runs, key=lambda r: r[0])[len(new_runs) // 2]
        old_rate = None
        if old_runs:
            old_rate, old_elapsed, _ = sorted(old_runs, key=lambda r: r[0])[len(old_runs) // 2]
        print(f"messages:                  {args.messages} (batch {args.batch}, {args.workers} drains)")
        print(f"baseline (1 confirm each): {base:,.0f} msg/s")
        print(
            f"outbox drain:              {drain_rate:,.0f} msg/s  ({elapsed:.2f} s, "
            f"{report.batches} batches; pika's public SelectConnection)"
        )
        if old_rate is not None:
            print(
                f"outbox drain, {args.legacy_ref}:     {old_rate:,.0f} msg/s  ({old_elapsed:.2f} s; "
                "pika's private API, for comparison; medians of the rounds)"
            )
        rounds = ", ".join(f"{r[0]:,.0f}" for r in new_runs)
        if old_runs:
            rounds += "; old: " + ", ".join(f"{r[0]:,.0f}" for r in old_runs)
        print(f"every round (msg/s):       new: {rounds}")
        print(f"unconfirmed pika:          {ceiling:,.0f} msg/s")
        print(f"ratio drain / baseline:    {drain_rate / base:.2f}x")
        print(f"ratio drain / unconfirmed: {drain_rate / ceiling:.2f}x")
        if old_rate is not None:
            print(
                f"ratio old / unconfirmed:   {old_rate / ceiling:.2f}x; "
                f"new / old: {drain_rate / old_rate:.2f}x"
            )
        print(
            f"goal >= 12,000 msg/s: {'met' if drain_rate >= 12000 else 'NOT met'}; "
            f"goal >= 2.5x: {'met' if drain_rate >= 2.5 * base else 'NOT met'}; "
            f"goal >= 0.8x unconfirmed: {'met' if drain_rate >= 0.8 * ceiling else 'NOT met'}"
        )


if __name__ == "__main__":
    main()
