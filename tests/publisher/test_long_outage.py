"""A 50-second RabbitMQ outage behind a fault proxy: triggers, job runs and trades lose and double nothing.

The shared RabbitMQ keeps running; kickoff reaches it only through harness/faultproxy.py, which
first black-holes the link (connects hang, a confirm never comes) and then refuses it (the
broker is down). The periodic drains run all along with test-sized backoff, so every saved
row is tried many times more than OUTBOX_MAX_ATTEMPTS. After the link is back every message
must be delivered exactly once per message id, no row dead, no action failed, every key held.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest

from harness.background import BackgroundLoop
from harness.faultproxy import FaultProxy
from models.db import database
from models.run_log import JobRunOutbox, RunLog, RunStatus
from publisher import trades
from publisher.amqp import AmqpPublisher, read_messages
from publisher.drain import drain_outbox_concurrently
from publisher.errors import TriggerUnavailableError
from publisher.outbox import outbox_report
from publisher.queues import DRAFT_TARGETS, JOB_RUNS, LINEUP_UPDATES, TRADE_SUBMISSIONS, WAIVER_ACTIONS
from publisher.trades import TradeStatus
from publisher.triggers import TriggerStatus, trigger_draft_pick, trigger_lineup, trigger_waiver
from runs.catalog import load_catalog
from runs.publish import drain_job_runs, pending_outbox_count, publish_run
from tests.publisher.helpers import count, draft, lineup, offer, waiver
from tests.waiting import wait_for

TRIGGERS = 1000  # sent while RabbitMQ is refused; one in ten is a draft pick
RUNS = 40
TRADES = 10
BLACKHOLE_SECONDS = 20.0  # at least (ten confirm timeouts); then refused for at least REFUSED_SECONDS
REFUSED_SECONDS = 30.0  # and until every pending row was tried TRIES_FACTOR times OUTBOX_MAX_ATTEMPTS
TRIES_FACTOR = 4  # every saved row is tried at least this many times OUTBOX_MAX_ATTEMPTS


class Drainer(BackgroundLoop):
    """What the periodic actors do (outbox drain with trade redelivery, run outbox drain), every 0.3 s."""

    interval = 0.3
    join_seconds = 120.0

    def __init__(self, *, settings: Any, make_publisher: Callable[[], AmqpPublisher]) -> None:
        super().__init__()
        self.settings = settings
        self.make_publisher = make_publisher
        self.errors: list[BaseException] = []
        self.runs = 0

    def step(self) -> None:
        try:
            drain_outbox_concurrently(
                settings=self.settings, publisher_factory=self.make_publisher, max_seconds=10
            )
            with self.make_publisher() as publisher:
                drain_job_runs(publisher=publisher, batch=500)
        except BaseException as exc:  # reported by the test
            self.errors.append(exc)
        finally:
            database.close()
        self.runs += 1

    def __exit__(self, *exc_info: object) -> None:
        super().__exit__(*exc_info)
        assert not self.alive, "the drainer did not stop"


def _offer(publisher: AmqpPublisher, n: int) -> trades.TradeResult:
    return offer(publisher, offer_key=f"offer-{n}", receive_player_ids=[4362628 + n], traceparent=None)


def _trigger(n: int, publisher: AmqpPublisher, settings: Any) -> tuple[str, str]:
    """Send request ``n``; returns (kind, tracking id). Draft picks answer unavailable."""
    if n % 10 == 0:
        try:
            trigger_draft_pick(
                draft(pick_number=n + 1, espn_id=4_000_000 + n), publisher=publisher, settings=settings
            )
        except TriggerUnavailableError as exc:
            assert exc.tracking_id
            return "draft", exc.tracking_id
        raise AssertionError("a draft pick was answered while RabbitMQ is away")
    if n % 2:
        result = trigger_lineup(
            lineup(idempotency_key=f"lineup-7-{n}"), publisher=publisher, settings=settings
        )
    else:
        result = trigger_waiver(
            waiver(add_player_id=1_000_000 + n, idempotency_key=f"waiver-7-{n}"),
            publisher=publisher,
            settings=settings,
        )
    assert result.status is TriggerStatus.PENDING and not result.published, result
    return ("lineup" if n % 2 else "waiver"), result.tracking_id


def _resend(kind: str, n: int, publisher: AmqpPublisher, settings: Any) -> Any:
    if kind == "draft":
        return trigger_draft_pick(
            draft(pick_number=n + 1, espn_id=4_000_000 + n), publisher=publisher, settings=settings
        )
    if kind == "lineup":
        return trigger_lineup(lineup(idempotency_key=f"lineup-7-{n}"), publisher=publisher, settings=settings)
    return trigger_waiver(
        waiver(add_player_id=1_000_000 + n, idempotency_key=f"waiver-7-{n}"),
        publisher=publisher,
        settings=settings,
    )


def _min_pending_tries() -> int:
    row = database.execute_sql("SELECT min(tries) FROM outbox_messages WHERE status = 'pending'").fetchone()
    return row[0] or 0


@pytest.mark.outage
@pytest.mark.timeout(900)
def test_a_long_outage_loses_and_doubles_nothing(fresh_queues, db, pub_settings, amqp_vhost):
    settings = pub_settings.model_copy(
        update={
            "outbox_max_attempts": 3,
            "outbox_backoff_base_seconds": 0.05,
            "outbox_backoff_max_seconds": 1.0,
            "outbox_immediate_grace_seconds": 0.0,
            "outbox_drain_workers": 2,
        }
    )
    catalog = load_catalog(settings.job_catalog_path)
    with FaultProxy(("127.0.0.1", 5672)) as proxy:
        url = proxy.url_via(amqp_vhost)

        def make_publisher() -> AmqpPublisher:
            return AmqpPublisher(url=url, confirm_timeout=2.0, connect_timeout=1.0)

        trigger_pub, trade_pub = make_publisher(), make_publisher()
        sent: list[tuple[str, int, str]] = []  # (kind, n, tracking id)
        run_ids: list[str] = []
        offers: list[trades.TradeResult] = []
        with Drainer(settings=settings, make_publisher=make_publisher) as drainer:
            # Before: both publishers connected through the proxy. On a loaded machine the short
            # test timeouts can miss the first connect; warm up until each publish is confirmed,
            # and let the drainer deliver whatever the misses left pending.
            warm_ids: list[str] = []
            for i in range(10):
                warm = trigger_lineup(
                    lineup(idempotency_key=f"lineup-7-warm-{i}"), publisher=trigger_pub, settings=settings
                )
                warm_ids.append(warm.tracking_id)
                if warm.status is TriggerStatus.QUEUED:
                    break
            assert warm.status is TriggerStatus.QUEUED
            for i in range(10):
                offers.append(_offer(trade_pub, 0 if i == 0 else 10_000 + i))
                if offers[-1].status is TradeStatus.PUBLISHED:
                    break
            assert offers[-1].status is TradeStatus.PUBLISHED
            wait_for(
                lambda: outbox_report().backlog == 0 and trades.redeliverable_trades() == 0,
                timeout=120,
                interval=0.5,
                what="warm-up delivered",
            )

            # 1. RabbitMQ hangs: connects time out, what was sent on open connections is never confirmed.
            proxy.blackhole()
            hung = time.monotonic()
            lost = trigger_lineup(
                lineup(idempotency_key="lineup-7-lost"), publisher=trigger_pub, settings=settings
            )
            assert lost.status is TriggerStatus.PENDING  # sent into the black hole: no confirm
            sent.append(("lineup", -1, lost.tracking_id))
            uncertain = _offer(trade_pub, 1)
            assert uncertain.status is TradeStatus.UNCERTAIN
            offers.append(uncertain)
            for n in range(TRIGGERS, TRIGGERS + 5):  # new connects hang until connect_timeout
                kind, tracking_id = _trigger(n, trigger_pub, settings)
                sent.append((kind, n, tracking_id))
            offers.append(_offer(trade_pub, 2))
            assert offers[-1].status is TradeStatus.PENDING
            wait_for(
                lambda: time.monotonic() - hung >= BLACKHOLE_SECONDS,
                timeout=300,
                interval=0.5,
                what="black hole",
            )

            # 2. RabbitMQ is down: every connect is refused.
            proxy.refuse()
            refused = time.monotonic()
            for n in range(TRIGGERS):
                kind, tracking_id = _trigger(n, trigger_pub, settings)
                sent.append((kind, n, tracking_id))
                if n % (TRIGGERS // RUNS) == 0:
                    result = publish_run("noop", trigger="cli", catalog=catalog, publisher=trigger_pub)
                    assert result.status == "pending"
                    run_ids.append(result.run_id)
                if n % (TRIGGERS // TRADES) == 0:
                    offers.append(_offer(trade_pub, 3 + n))
                    assert offers[-1].status is TradeStatus.PENDING
            max_attempts = settings.outbox_max_attempts
            wait_for(
                lambda: (
                    time.monotonic() - refused >= REFUSED_SECONDS
                    and _min_pending_tries() >= TRIES_FACTOR * max_attempts
                ),
                timeout=600,
                interval=0.5,
                what=f"every pending row tried {TRIES_FACTOR * max_attempts} times",
            )
            outage = time.monotonic() - hung
            report = outbox_report()
            assert report.dead == 0 and report.backlog == len(sent)
            assert count("activity_actions", "status = 'failed'") == 0
            assert count("outbox_messages", "attempts > 0") == 0  # no refusal of a message: no attempt used
            tries = database.execute_sql(
                "SELECT min(tries), max(tries) FROM outbox_messages WHERE status = 'pending'"
            ).fetchone()
            run_tries = JobRunOutbox.select().where(JobRunOutbox.published_at.is_null()).count()
            assert run_tries == len(run_ids)

            # 3. RabbitMQ is back.
            proxy.forward()
            back = time.monotonic()
            wait_for(
                lambda: (
                    outbox_report().backlog == 0
                    and pending_outbox_count() == 0
                    and trades.redeliverable_trades() == 0
                ),
                timeout=300,
                interval=0.5,
                what="backlog delivered after the outage",
            )
            recovered = time.monotonic() - back
        assert drainer.errors == []
        trigger_pub.close()
        trade_pub.close()

        # Exactly once per message id, one message per action, none lost.
        messages = [
            m
            for q in (LINEUP_UPDATES, WAIVER_ACTIONS, DRAFT_TARGETS)
            for m in read_messages(url=amqp_vhost, queue=q)
        ]
        by_message_id = Counter(p.message_id for _, p in messages)
        assert set(by_message_id.values()) == {1}
        delivered = Counter(b["tracking_id"] for b, _ in messages)
        expected = {t for _, _, t in sent} | set(warm_ids)
        assert set(delivered) == expected and set(delivered.values()) == {1}
        outbox_ids = {
            str(r[0]) for r in database.execute_sql("SELECT message_id FROM outbox_messages").fetchall()
        }
        assert set(by_message_id) == outbox_ids

        # No dead row, no failed action, every action delivered, every key still held.
        assert outbox_report().dead == 0
        assert count("outbox_messages", "status <> 'published'") == 0
        assert count("activity_actions", "status <> 'delivered'") == 0
        assert count("activity_actions", "idempotency_key IS NULL OR released_key IS NOT NULL") == 0
        with AmqpPublisher(url=amqp_vhost) as direct:
            for kind, n, tracking_id in sent:
                if n < 0:
                    continue
                again = _resend(kind, n, direct, settings)
                assert again.status is TriggerStatus.DUPLICATE and again.tracking_id == tracking_id
                assert again.published

        # Job runs: one command per run, every run still queued for a launcher.
        commands = read_messages(url=amqp_vhost, queue=JOB_RUNS)
        assert Counter(p.message_id for _, p in commands).most_common(1)[0][1] == 1
        assert sorted(b["run_id"] for b, _ in commands) == sorted(run_ids)
        assert RunLog.select().where(RunLog.status == RunStatus.QUEUED.value).count() == len(run_ids)

        # Trades: every claim known unsent published once; the uncertain one waits for an operator.
        published = read_messages(url=amqp_vhost, queue=TRADE_SUBMISSIONS)
        unsent = [o for o in offers if o is not uncertain]
        assert Counter(p.message_id for _, p in published).most_common(1)[0][1] == 1
        assert sorted(p.message_id for _, p in published) == sorted(o.message_id for o in unsent)
        assert {trades.get_entry(TRADE_SUBMISSIONS, o.claim_key).status for o in unsent} == {"published"}
        assert trades.get_entry(TRADE_SUBMISSIONS, uncertain.claim_key).status == "uncertain"
    print(
        f"outage {outage:.0f}s ({BLACKHOLE_SECONDS:.0f}s black hole, then refused); "
        f"{len(sent)} triggers, {len(run_ids)} runs, {len(offers)} trades; "
        f"outbox tries min {tries[0]} max {tries[1]} (max attempts {max_attempts}); "
        f"drain runs {drainer.runs}; delivered {recovered:.1f}s after the link came back"
    )
