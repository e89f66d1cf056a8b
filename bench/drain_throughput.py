"""Drain throughput: the outbox drain against plain pika publishing the same messages, in one run.

The drain (batched publishes, pipelined confirms, one UPDATE per batch, ``--workers`` drains
taking turns to write) is measured beside plain pika on the same messages: without confirms at
all (fire and forget: the ceiling of what pika alone pushes) and one confirm at a time (the
baseline). Each of ``--rounds`` rounds times unconfirmed pika and the drain back to back
(alternating which goes first), so each round's ratio compares two figures of the same moment;
the figures are the medians over the rounds. One confirm at a time is slow, so it is timed once,
on ``--baseline-messages``.

The same run also drains with the publisher of ``--legacy-ref`` (default: the last commit whose
publisher pipelined confirms on pika's private API, publisher/pika_compat.py), loaded from git
into this process only, in every round; ``--legacy-ref ''`` skips it.

Run: .venv/bin/python bench/drain_throughput.py [--messages N] [--batch B] [--rounds R] [--json] [--save]
Goals (issues 5, 23, 36): drain >= 12,000 msg/s on a 2-core machine, >= 2.5 x one confirm at a
time, >= 0.8 x unconfirmed pika (the median of the rounds' ratios).
"""

from __future__ import annotations

import json
import logging
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import pika

from bench._setup import LEGACY_REF, bench_environment, module_at, purge
from bench._verdict import Bench, Goal
from config.settings import KickoffSettings
from models.db import database
from publisher.drain import drain_outbox_concurrently

BENCH = Bench(
    "drain_throughput",
    __doc__,
    [
        Goal("drain_msg_per_s", 12_000, at_most=False, unit="msg/s", source="issue 23 (2-core machine)"),
        Goal("ratio_baseline", 2.5, at_most=False, unit="x", source="issue 5: x one confirm at a time"),
        Goal("ratio_unconfirmed", 0.8, at_most=False, unit="x", source="issue 36: x unconfirmed pika"),
    ],
)


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
    """Plain pika, one basic_publish per message of the outbox's first ``n`` rows: messages/second.

    With ``confirms`` the channel is in confirm mode (each publish waits for its confirm).
    Without, nothing is awaited but one passive declare after the loop: a round trip on the same
    channel, so the broker has processed every publish before the clock stops. The rows are only
    read (they stay pending).
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
    return len(rows) / elapsed


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


def timed_drain(settings: object, messages: int, workers: int, factory: Callable[[], object] | None) -> float:
    """Drain the ``messages`` pending rows: messages/second (every row must be published)."""
    start = time.perf_counter()
    report = drain_outbox_concurrently(settings=settings, workers=workers, publisher_factory=factory)
    elapsed = time.perf_counter() - start
    if report.published != messages:
        raise SystemExit(f"the drain published {report.published} of {messages} rows: {report}")
    return messages / elapsed


def clear_outbox() -> None:
    database.execute_sql("DELETE FROM outbox_messages")


def measure(args: object) -> dict[str, object]:
    with bench_environment(outbox_batch_size=args.batch, outbox_drain_max_seconds=600) as settings:
        legacy = legacy_publisher_factory(args.legacy_ref, settings) if args.legacy_ref else None
        fill_outbox(args.baseline_messages)
        base = plain_pika(settings.amqp_url, args.baseline_messages, confirms=True)
        clear_outbox()
        purge(settings.amqp_url)
        rounds: list[dict[str, float]] = []
        for n in range(args.rounds):
            row: dict[str, float] = {}
            steps: list[tuple[str, Callable[[], float]]] = [
                ("unconfirmed", lambda: plain_pika(settings.amqp_url, args.messages, confirms=False)),
                ("drain", lambda: timed_drain(settings, args.messages, args.workers, None)),
            ]
            if legacy is not None:
                steps.append(("legacy", lambda: timed_drain(settings, args.messages, args.workers, legacy)))
            for name, step in steps if n % 2 == 0 else steps[::-1]:
                fill_outbox(args.messages)
                row[name] = step()
                clear_outbox()  # unconfirmed pika only reads the rows
                purge(settings.amqp_url)
            rounds.append(row)
            print(
                f"round {n + 1}: drain {row['drain']:,.0f} msg/s, unconfirmed pika {row['unconfirmed']:,.0f} "
                f"({row['drain'] / row['unconfirmed']:.2f}x)"
                + (f", {args.legacy_ref}'s drain {row['legacy']:,.0f}" if "legacy" in row else ""),
                flush=True,
            )

    def median(key: str) -> float:
        return statistics.median(r[key] for r in rounds)

    figures: dict[str, object] = {
        "messages": args.messages,
        "batch": args.batch,
        "workers": args.workers,
        "rounds": rounds,
        "drain_msg_per_s": median("drain"),
        "unconfirmed_msg_per_s": median("unconfirmed"),
        "baseline_msg_per_s": base,
        "ratio_unconfirmed": statistics.median(r["drain"] / r["unconfirmed"] for r in rounds),
        "ratio_unconfirmed_min": min(r["drain"] / r["unconfirmed"] for r in rounds),
        "ratio_unconfirmed_max": max(r["drain"] / r["unconfirmed"] for r in rounds),
        "ratio_baseline": median("drain") / base,
    }
    if legacy is not None:
        figures["legacy_ref"] = args.legacy_ref
        figures["legacy_msg_per_s"] = median("legacy")
        figures["legacy_ratio_unconfirmed"] = statistics.median(
            r["legacy"] / r["unconfirmed"] for r in rounds
        )
        figures["ratio_legacy"] = statistics.median(r["drain"] / r["legacy"] for r in rounds)
    print(
        f"messages:                  {args.messages} (batch {args.batch}, {args.workers} drains, "
        f"medians of {args.rounds} rounds)"
    )
    print(f"baseline (1 confirm each): {base:,.0f} msg/s ({args.baseline_messages} messages)")
    print(
        f"outbox drain:              {figures['drain_msg_per_s']:,.0f} msg/s (pika's public SelectConnection)"
    )
    print(f"unconfirmed pika:          {figures['unconfirmed_msg_per_s']:,.0f} msg/s")
    print(f"ratio drain / baseline:    {figures['ratio_baseline']:.2f}x")
    print(
        f"ratio drain / unconfirmed: {figures['ratio_unconfirmed']:.2f}x "
        f"(rounds {figures['ratio_unconfirmed_min']:.2f}-{figures['ratio_unconfirmed_max']:.2f}x)"
    )
    if legacy is not None:
        print(
            f"{args.legacy_ref}'s drain (pika's private API): {figures['legacy_msg_per_s']:,.0f} msg/s, "
            f"{figures['legacy_ratio_unconfirmed']:.2f}x unconfirmed; "
            f"new / old {figures['ratio_legacy']:.2f}x"
        )
    return figures


def main() -> int:
    parser = BENCH.parser()
    parser.add_argument("--messages", type=int, default=20_000, help="messages per timed drain")
    parser.add_argument(
        "--batch",
        type=int,
        default=KickoffSettings.model_fields["outbox_batch_size"].default,
        help="rows per batch (default: OUTBOX_BATCH_SIZE's default)",
    )
    parser.add_argument(
        "--workers",
        type=int,
        default=KickoffSettings.model_fields["outbox_drain_workers"].default,
        help="drains side by side (default: OUTBOX_DRAIN_WORKERS's default)",
    )
    parser.add_argument("--rounds", type=int, default=5, help="rounds (medians reported)")
    parser.add_argument(
        "--baseline-messages", type=int, default=2000, help="messages of the one-confirm-at-a-time baseline"
    )
    parser.add_argument(
        "--legacy-ref", default=LEGACY_REF, help="git ref whose publisher runs beside ('' to skip)"
    )
    args = parser.parse_args()
    for name in ("messages", "batch", "workers", "rounds", "baseline_messages"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be at least 1")
    logging.basicConfig(level=logging.WARNING)
    with BENCH.output(args):
        return BENCH.finish(args, measure(args))


if __name__ == "__main__":
    sys.exit(main())
