"""Direct trade publishes: execution_log claim first, durable queues; the drain resends only unsent claims."""

from __future__ import annotations

import logging

import pytest

from publisher import trades
from publisher.amqp import AmqpPublisher
from publisher.drain import drain_outbox_concurrently
from publisher.errors import TradeError, TriggerValidationError
from publisher.trades import TradeStatus
from tests.publisher.helpers import TRACEPARENT, counter, offer, reject_all
from tests.publisher.trade_claims import DOWN_URL, pending_offer, poison, status_of, uncertain_offer


def test_an_offer_is_claimed_then_published_to_a_durable_queue(publisher, read_queue):
    result = offer(publisher)
    assert result.status is TradeStatus.PUBLISHED
    assert trades.get_entry("trade_submissions", "offer-1").status == "published"
    [(body, props)] = read_queue("trade_submissions")
    assert body["offer_key"] == "offer-1" and props.message_id == result.message_id
    assert props.headers == {"traceparent": TRACEPARENT}


def test_a_second_approval_of_the_same_offer_is_a_duplicate_and_publishes_nothing(publisher, read_queue):
    first = offer(publisher)
    second = offer(publisher)
    assert second.status is TradeStatus.DUPLICATE and second.message_id == first.message_id
    assert len(read_queue("trade_submissions")) == 1


def test_a_second_decision_with_the_same_decision_key_is_a_duplicate_and_publishes_nothing(
    publisher, read_queue
):
    kw = {"decision_key": "decision-1", "league_id": "L1", "team": "7", "trade_id": "t-9"}
    first = trades.respond_to_trade(decision="accept", publisher=publisher, **kw)
    again = trades.respond_to_trade(decision="reject", publisher=publisher, **kw)  # even a changed mind
    assert first.status is TradeStatus.PUBLISHED
    assert again.status is TradeStatus.DUPLICATE and again.message_id == first.message_id
    [(body, _)] = read_queue("trade_responses")
    assert body["decision"] == "accept"


def test_counter_staging_takes_sleeper_ids_and_refuses_espn_ids(publisher, read_queue):
    with pytest.raises(TriggerValidationError) as info:
        counter(publisher, give_player_ids=[3139477])
    assert info.value.field == "give_player_ids[0]"
    ok = counter(publisher)
    assert ok.status is TradeStatus.PUBLISHED
    [(body, _)] = read_queue("trade_negotiations")
    assert body["give_player_ids"] == ["6794"]


def test_a_decision_the_unreachable_broker_never_got_is_pending_and_can_be_retried_with_the_same_message_id(
    db, fresh_queues, amqp_vhost, read_queue
):
    down = AmqpPublisher(url="amqp://guest:guest@127.0.0.1:1/%2F", connect_timeout=1)
    pending = trades.respond_to_trade(
        decision_key="d1", league_id="L1", team="7", trade_id="t9", decision="accept", publisher=down
    )
    assert pending.status is TradeStatus.PENDING
    with AmqpPublisher(url=amqp_vhost) as up:
        retried = trades.retry_decision(decision_key="d1", publisher=up)
        assert retried.status is TradeStatus.PUBLISHED
        with pytest.raises(TradeError, match="only a failed or pending decision"):
            trades.retry_decision(decision_key="d1", publisher=up)
    [(body, props)] = read_queue("trade_responses")
    assert body["decision"] == "accept" and props.message_id == pending.message_id


def test_a_refused_trade_publish_is_failed(publisher, amqp_vhost, read_queue):
    reject_all(amqp_vhost, "trade_submissions")
    publisher.declare_durable([])  # connected; skip the durable declare (other arguments: a 406)
    publisher._checked.add("trade_submissions")  # so the offer goes straight into the nacking queue
    result = offer(publisher, offer_key="offer-refused")
    assert result.status is TradeStatus.FAILED and "nacked" in result.error
    assert trades.redeliverable_trades() == 0


def _refused(publisher, amqp_vhost, queue: str):
    """A publisher that sends straight into ``queue`` made to nack every message (the broker refuses)."""
    reject_all(amqp_vhost, queue)
    publisher.declare_durable([])
    publisher._checked.add(queue)
    return publisher


@pytest.mark.parametrize(
    ("queue", "key", "send"),
    [
        ("trade_submissions", "offer-1", offer),
        (
            "trade_responses",
            "d1",
            lambda p: trades.respond_to_trade(
                decision_key="d1", league_id="L1", team="7", trade_id="t9", decision="accept", publisher=p
            ),
        ),
        ("trade_negotiations", "p1", counter),
    ],
    ids=["offer", "decision", "counter"],
)
def test_a_refused_claim_of_every_kind_waits_for_reconcile_and_a_retry_sends_it_audited(
    db, fresh_queues, amqp_vhost, read_queue, queue, key, send
):
    """Refused: a repeat is a duplicate, so retry and reconcile are the way out, for every kind."""
    from models.audit import Actor, AuditContext, audit_entries
    from publisher.trade_reconcile import claims_to_reconcile

    with AmqpPublisher(url=amqp_vhost) as refusing:
        refused = send(_refused(refusing, amqp_vhost, queue))
    assert refused.status is TradeStatus.FAILED
    assert [(c.queue, c.claim_key) for c in claims_to_reconcile()] == [(queue, key)]
    with AmqpPublisher(url=amqp_vhost) as admin:
        admin.delete_queue(queue)  # the broker takes it again (declared durable on publish)
    with AmqpPublisher(url=amqp_vhost) as up:
        assert send(up).status is TradeStatus.DUPLICATE  # a repeat of the request sends nothing
        audit = AuditContext(Actor.cli(), "broker fixed")
        retried = trades.retry_claim(queue=queue, claim_key=key, publisher=up, audit=audit)
        assert retried.status is TradeStatus.PUBLISHED and retried.message_id == refused.message_id
        with pytest.raises(TradeError, match="only a failed or pending"):
            trades.retry_claim(queue=queue, claim_key=key, publisher=up)
    [(_, props)] = read_queue(queue)
    assert props.message_id == refused.message_id
    [entry] = audit_entries(action="trade.retry")
    assert entry.target_id == f"{queue}/{key}" and entry.reason == "broker fixed"
    assert claims_to_reconcile() == []


def test_a_refused_counter_is_reconciled_by_a_republish(db, fresh_queues, amqp_vhost, read_queue):
    from publisher.trade_reconcile import Resolution, reconcile_claim

    with AmqpPublisher(url=amqp_vhost) as refusing:
        refused = counter(_refused(refusing, amqp_vhost, "trade_negotiations"))
    with AmqpPublisher(url=amqp_vhost) as admin:
        admin.delete_queue("trade_negotiations")
    with AmqpPublisher(url=amqp_vhost) as up:
        entry = reconcile_claim(
            queue="trade_negotiations",
            claim_key="p1",
            resolution=Resolution.REPUBLISH,
            operator="ops",
            publisher=up,
        )
    assert entry.status == "published" and entry.resolution == "republish"
    [(_, props)] = read_queue("trade_negotiations")
    assert props.message_id == refused.message_id


def test_the_drain_redelivers_pending_claims_with_their_message_ids(
    publisher, pub_settings, amqp_vhost, read_queue
):
    first, second = pending_offer(offer_key="offer-p1"), pending_offer(offer_key="offer-p2")
    assert trades.redeliverable_trades() == 2
    down = AmqpPublisher(url=DOWN_URL, connect_timeout=1)
    report = drain_outbox_concurrently(settings=pub_settings, publisher_factory=lambda: down)
    assert report.trades == 0 and trades.redeliverable_trades() == 2  # still away: both wait
    report = drain_outbox_concurrently(
        settings=pub_settings, publisher_factory=lambda: AmqpPublisher(url=amqp_vhost)
    )
    assert report.trades == 2 and trades.redeliverable_trades() == 0
    assert {status_of("offer-p1"), status_of("offer-p2")} == {"published"}
    ids = sorted(p.message_id for _, p in read_queue("trade_submissions"))
    assert ids == sorted([first.message_id, second.message_id])


@pytest.mark.parametrize(
    "reaches_broker",
    [
        pytest.param(True, id="the-broker-took-it-its-confirm-was-lost"),
        pytest.param(False, id="lost-on-the-way"),
    ],
)
def test_an_uncertain_publish_stays_uncertain_and_the_drain_does_not_republish_it(
    publisher, pub_settings, amqp_vhost, read_queue, reaches_broker
):
    lost = uncertain_offer(amqp_vhost, offer_key="offer-lost", reaches_broker=reaches_broker)
    known_unsent = pending_offer(offer_key="offer-unsent")
    assert trades.redeliverable_trades() == 1  # only the claim known unsent
    for _ in range(2):
        report = drain_outbox_concurrently(
            settings=pub_settings, publisher_factory=lambda: AmqpPublisher(url=amqp_vhost)
        )
    entry = trades.get_entry("trade_submissions", "offer-lost")
    assert entry.status == "uncertain" and entry.resolution is None and "not confirmed" in entry.error
    assert status_of("offer-unsent") == "published" and report.trades == 0
    held = [lost.message_id] if reaches_broker else []
    ids = sorted(p.message_id for _, p in read_queue("trade_submissions"))
    assert ids == sorted([*held, known_unsent.message_id])  # the uncertain one: never sent twice


@pytest.mark.parametrize(
    ("spoil", "reason"),
    [
        pytest.param({"body": ["not", "an", "object"]}, "JSON list, not an object", id="body-not-an-object"),
        pytest.param({"body": {"offer_key": "another"}}, "not the claim key", id="body-of-another-key"),
    ],
)
def test_the_drain_sets_a_poisoned_claim_aside_with_its_reason_and_publishes_the_claims_after_it(
    publisher, pub_settings, amqp_vhost, read_queue, caplog, spoil, reason
):
    pending_offer(offer_key="offer-poison")  # the oldest claim: the drain meets it first
    poison("offer-poison", **spoil)
    good = [pending_offer(offer_key=f"offer-good-{n}") for n in range(3)]
    with caplog.at_level(logging.INFO, logger="publisher.trades"):
        report = drain_outbox_concurrently(
            settings=pub_settings, publisher_factory=lambda: AmqpPublisher(url=amqp_vhost)
        )
    poisoned = trades.get_entry("trade_submissions", "offer-poison")
    assert poisoned.status == "set_aside" and reason in poisoned.error
    assert report.trades == 3 and {status_of(f"offer-good-{n}") for n in range(3)} == {"published"}
    sent = [p.message_id for _, p in read_queue("trade_submissions")]
    assert sorted(sent) == sorted(g.message_id for g in good)
    lines = [r for r in caplog.records if r.getMessage().startswith("trade claim set aside")]
    assert len(lines) == 1 and "offer-poison" in lines[0].getMessage() and reason in lines[0].getMessage()
    assert trades.redeliverable_trades() == 0  # set aside: the next drain does not meet it again


def test_a_claim_whose_publish_fails_in_an_unforeseen_way_is_set_aside_and_the_drain_goes_on(
    publisher, amqp_vhost, read_queue, monkeypatch
):
    bad = pending_offer(offer_key="offer-bad")
    good = pending_offer(offer_key="offer-good")
    publish = publisher.publish

    def publish_or_break(message):
        if message.message_id == bad.message_id:
            raise ValueError("a bug this message alone meets")
        publish(message)

    monkeypatch.setattr(publisher, "publish", publish_or_break)  # the drain's loop is under test here
    report = trades.redeliver_trades(publisher=publisher)
    assert (report.published, report.set_aside, report.waiting) == (1, 1, 0)
    entry = trades.get_entry("trade_submissions", "offer-bad")
    assert entry.status == "set_aside" and entry.error == "ValueError: a bug this message alone meets"
    assert [p.message_id for _, p in read_queue("trade_submissions")] == [good.message_id]


def test_request_only_fields_are_stripped_before_publishing():
    from publisher.validation import strip_request_only

    body = {"a": 1, "decision_inputs": {}, "swap_kind": "ir", "after_tracking_id": "x"}
    assert strip_request_only(body) == {"a": 1}


def test_a_key_is_claimed_once_per_league_and_a_repeat_is_a_duplicate_in_its_own_league_only(
    db, fresh_queues, amqp_vhost, read_queue
):
    """Issue 35: the claim's unique key is (league, queue, key): another league's claim of a key neither
    blocks nor answers this league's request, and a caller names the league when both claimed it."""
    from publisher.errors import TradeClaimAmbiguous, TradeNotFound

    down = AmqpPublisher(url="amqp://guest:guest@127.0.0.1:1/%2F", connect_timeout=1)
    kw = {"decision_key": "t-shared", "team": "7", "trade_id": "t-shared", "decision": "accept"}
    pending = trades.respond_to_trade(league_id="L1", publisher=down, **kw)
    with AmqpPublisher(url=amqp_vhost) as up:
        other = trades.respond_to_trade(league_id="L2", publisher=up, **kw)
        assert pending.status is TradeStatus.PENDING and other.status is TradeStatus.PUBLISHED
        again = trades.respond_to_trade(league_id="L2", publisher=up, **kw)
        assert again.status is TradeStatus.DUPLICATE and again.message_id == other.message_id
        with pytest.raises(TradeClaimAmbiguous, match="name the league"):
            trades.retry_decision(decision_key="t-shared", publisher=up)
        with pytest.raises(TradeNotFound) as absent:
            trades.retry_decision(decision_key="t-shared", publisher=up, leagues=["L9"])
        assert "L1" not in str(absent.value) and "L2" not in str(absent.value)
        # a caller limited to L1 reaches L1's claim without naming it; L2's stays as it was
        retried = trades.retry_decision(decision_key="t-shared", publisher=up, leagues=["l1"])
        assert retried.status is TradeStatus.PUBLISHED and retried.message_id == pending.message_id
    assert trades.get_entry("trade_responses", "t-shared", league_id="L1").status == "published"
    assert trades.get_entry("trade_responses", "t-shared", league_id="L2").message_id == other.message_id
    bodies = read_queue("trade_responses")
    assert sorted(b["league_id"] for b, _ in bodies) == ["L1", "L2"]
