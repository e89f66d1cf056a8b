"""Direct trade publishes: execution_log claim first, durable queues, pending/uncertain claims redelivered."""

from __future__ import annotations

import pytest

from config.errors import PublishUncertainError, TradeError, TriggerValidationError
from publisher import trades
from publisher.amqp import AmqpPublisher
from publisher.drain import drain_outbox_concurrently
from publisher.trades import Resolution, TradeStatus
from tests.publisher.helpers import TRACEPARENT, count, counter, offer, reject_all


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


def test_the_drain_redelivers_pending_and_uncertain_claims_with_their_message_ids(
    publisher, pub_settings, amqp_vhost, read_queue, monkeypatch
):
    down = AmqpPublisher(url="amqp://guest:guest@127.0.0.1:1/%2F", connect_timeout=1)
    pending = offer(down, offer_key="offer-pending")
    monkeypatch.setattr(
        publisher, "publish", lambda m: (_ for _ in ()).throw(PublishUncertainError("sent, no confirm"))
    )
    uncertain = offer(publisher, offer_key="offer-uncertain")
    monkeypatch.undo()
    assert (pending.status, uncertain.status) == (TradeStatus.PENDING, TradeStatus.UNCERTAIN)
    assert trades.redeliverable_trades() == 2

    report = drain_outbox_concurrently(settings=pub_settings, publisher_factory=lambda: down)
    assert report.trades == 0 and trades.redeliverable_trades() == 2  # still away: both wait
    report = drain_outbox_concurrently(
        settings=pub_settings, publisher_factory=lambda: AmqpPublisher(url=amqp_vhost)
    )
    assert report.trades == 2 and trades.redeliverable_trades() == 0
    assert trades.get_entry("trade_submissions", "offer-pending").status == "published"
    entry = trades.get_entry("trade_submissions", "offer-uncertain")
    assert entry.status == "published" and entry.resolution == "republish"
    ids = sorted(p.message_id for _, p in read_queue("trade_submissions"))
    assert ids == sorted([pending.message_id, uncertain.message_id])


def test_an_uncertain_publish_is_marked_for_manual_reconciliation(publisher, read_queue, monkeypatch):
    def lost_confirm(message):
        raise PublishUncertainError("sent but not confirmed: connection reset")

    monkeypatch.setattr(publisher, "publish", lost_confirm)
    result = offer(publisher)
    assert result.status is TradeStatus.UNCERTAIN
    assert [e.claim_key for e in trades.list_uncertain()] == ["offer-1"]
    monkeypatch.undo()
    entry = trades.resolve_uncertain(
        queue="trade_submissions",
        claim_key="offer-1",
        resolution=Resolution.REPUBLISH,
        operator="ops",
        publisher=publisher,
    )
    assert entry.status == "published" and entry.resolution == "republish"
    assert trades.list_uncertain() == []
    assert len(read_queue("trade_submissions")) == 1


def test_resolving_as_published_sends_nothing(publisher, read_queue, monkeypatch):
    monkeypatch.setattr(publisher, "publish", lambda m: (_ for _ in ()).throw(PublishUncertainError("lost")))
    offer(publisher, offer_key="offer-2")
    entry = trades.resolve_uncertain(
        queue="trade_submissions", claim_key="offer-2", resolution=Resolution.PUBLISHED, operator="ops"
    )
    assert entry.status == "resolved" and count("execution_log", "status = 'uncertain'") == 0
    publisher.declare_durable(["trade_submissions"])
    assert read_queue("trade_submissions") == []


def test_request_only_fields_are_stripped_before_publishing():
    from publisher.validation import strip_request_only

    body = {"a": 1, "decision_inputs": {}, "swap_kind": "ir", "after_tracking_id": "x"}
    assert strip_request_only(body) == {"a": 1}
