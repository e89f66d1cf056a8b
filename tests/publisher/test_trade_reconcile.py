"""Reconciling trade claims by hand (`kickoff trades reconcile`): the list, and each of the three choices."""

from __future__ import annotations

import json
import logging
from datetime import timedelta

import pytest

from config.clock import utcnow
from models.db import database
from publisher import trades
from publisher.amqp import AmqpPublisher
from publisher.errors import TradeError, UnusableTradeClaim
from publisher.results import action_state, report_result, verify_results
from publisher.trade_reconcile import Resolution, claims_to_reconcile, reconcile_claim
from publisher.trades import TradeStatus, redeliver_trades
from publisher.triggers import trigger_lineup
from tests.publisher.helpers import lineup, offer
from tests.publisher.trade_claims import DOWN_URL, pending_offer, poison, status_of, uncertain_offer
from tests.racing import race


def _backdate(claim_key: str, seconds: float) -> None:
    database.execute_sql(
        "UPDATE execution_log SET created_at = %s WHERE claim_key = %s",
        (utcnow() - timedelta(seconds=seconds), claim_key),
    )


def _stuck_claim(claim_key: str, *, age_seconds: float) -> None:
    """A claim left in ``claimed`` (its process died between claim and publish)."""
    pending_offer(offer_key=claim_key)
    database.execute_sql("UPDATE execution_log SET status = 'claimed' WHERE claim_key = %s", (claim_key,))
    _backdate(claim_key, age_seconds)


def _set_aside(claim_key: str, amqp_vhost: str) -> None:
    pending_offer(offer_key=claim_key)
    poison(claim_key, body=["spoiled"])
    with AmqpPublisher(url=amqp_vhost) as pub:
        assert redeliver_trades(publisher=pub).set_aside == 1


def _reconcile(
    claim_key: str, resolution: Resolution, publisher: AmqpPublisher | None = None
) -> trades.ExecutionEntry:
    """An operator's (``ops``) reconcile of the trade submission ``claim_key``."""
    return reconcile_claim(
        queue="trade_submissions",
        claim_key=claim_key,
        resolution=resolution,
        operator="ops",
        publisher=publisher,
    )


def test_reconcile_lists_uncertain_set_aside_and_stuck_claims_oldest_first(run, amqp_vhost):
    uncertain_offer(amqp_vhost, offer_key="offer-uncertain")
    _backdate("offer-uncertain", 30)
    _set_aside("offer-spoiled", amqp_vhost)
    _stuck_claim("offer-stuck", age_seconds=600)
    _stuck_claim("offer-in-flight", age_seconds=1)  # its first publish may still be under way
    pending_offer(offer_key="offer-pending")  # known unsent: the drain's, not the operator's
    code, out = run("trades", "reconcile", "--json")
    assert code == 0, out
    doc = json.loads(out)
    claims = [(c["claim_key"], c["status"]) for c in doc["claims"]]
    assert claims == [
        ("offer-stuck", "claimed"),
        ("offer-uncertain", "uncertain"),
        ("offer-spoiled", "set_aside"),
    ]
    assert doc["count"] == 3
    spoiled = doc["claims"][2]
    assert "not an object" in spoiled["error"] and spoiled["message_id"]
    code, out = run("trades", "reconcile")
    assert code == 0 and "offer-uncertain" in out and "not an object" in out and "offer-pending" not in out


def test_an_action_result_the_verification_set_aside_is_not_listed_among_the_trade_claims(
    run, publisher, pub_settings, amqp_vhost
):
    tracking_id = trigger_lineup(lineup(), publisher=publisher, settings=pub_settings).tracking_id
    report_result(tracking_id, outcome="succeeded")
    database.execute_sql(  # a body without its outcome: the verification sets the result aside
        "UPDATE execution_log SET body = %s WHERE claim_key = %s",
        (json.dumps({"tracking_id": tracking_id}), f"result:{tracking_id}"),
    )
    assert list(verify_results(result_timeout_seconds=86400.0).set_aside) == [tracking_id]
    assert action_state(tracking_id)["verification"]["status"] == "set_aside"
    _set_aside("offer-spoiled", amqp_vhost)
    assert [(c.queue, c.claim_key) for c in claims_to_reconcile()] == [("trade_submissions", "offer-spoiled")]
    code, out = run("trades", "reconcile", "--json")
    assert code == 0 and [c["claim_key"] for c in json.loads(out)["claims"]] == ["offer-spoiled"], out


def test_reconcile_as_published_marks_the_claim_resolved_and_sends_nothing(run, amqp_vhost, read_queue):
    lost = uncertain_offer(amqp_vhost, offer_key="offer-1", reaches_broker=True)  # RabbitMQ holds it
    code, out = run(
        "trades", "reconcile", "trade_submissions", "offer-1", "--as", "published", "--operator", "ops"
    )
    assert code == 0, out
    assert (
        out.strip() == f"trade_submissions offer-1: resolved (published by ops; message id {lost.message_id})"
    )
    entry = trades.get_entry("trade_submissions", "offer-1")
    assert (entry.status, entry.resolution, entry.resolved_by) == ("resolved", "published", "ops")
    assert entry.resolved_at is not None and claims_to_reconcile() == []
    assert [p.message_id for _, p in read_queue("trade_submissions")] == [lost.message_id]  # once


def test_reconcile_republish_sends_the_claim_again_with_the_same_message_id(run, amqp_vhost, read_queue):
    lost = uncertain_offer(amqp_vhost, offer_key="offer-1")
    assert read_queue("trade_submissions") == []  # the black hole swallowed the first send
    code, out = run(
        "trades",
        "reconcile",
        "trade_submissions",
        "offer-1",
        "--as",
        "republish",
        "--operator",
        "ops",
        "--json",
    )
    assert code == 0, out
    answer = json.loads(out)
    assert (answer["status"], answer["resolution"], answer["resolved_by"]) == (
        "published",
        "republish",
        "ops",
    )
    [(body, props)] = read_queue("trade_submissions")
    assert props.message_id == lost.message_id == answer["message_id"]
    assert body["offer_key"] == "offer-1"
    assert claims_to_reconcile() == []


def test_reconcile_cancel_marks_the_claim_cancelled_and_nothing_sends_it_again(
    run, amqp_vhost, read_queue, pub_settings
):
    from publisher.drain import drain_outbox_concurrently

    lost = uncertain_offer(amqp_vhost, offer_key="offer-1")
    code, out = run(
        "trades", "reconcile", "trade_submissions", "offer-1", "--as", "cancel", "--operator", "ops"
    )
    assert code == 0 and "cancelled (cancel by ops" in out, out
    drain_outbox_concurrently(settings=pub_settings, publisher_factory=lambda: AmqpPublisher(url=amqp_vhost))
    assert status_of("offer-1") == "cancelled"
    with AmqpPublisher(url=amqp_vhost) as pub:
        again = offer(pub, offer_key="offer-1")  # the key stays claimed
    assert again.status is TradeStatus.DUPLICATE and again.message_id == lost.message_id
    assert read_queue("trade_submissions") == []


def test_a_claim_no_longer_waiting_is_refused_and_left_as_it_is(run, amqp_vhost, read_queue):
    uncertain_offer(amqp_vhost, offer_key="offer-1")
    assert run("trades", "reconcile", "trade_submissions", "offer-1", "--as", "published")[0] == 0
    code, out = run("trades", "reconcile", "trade_submissions", "offer-1", "--as", "republish")
    assert code == 4 and "is resolved, not waiting for an operator" in out  # a conflict
    assert status_of("offer-1") == "resolved" and read_queue("trade_submissions") == []
    code, out = run("trades", "reconcile", "trade_submissions", "offer-404", "--as", "cancel")
    assert code == 2 and "no execution_log claim for 'offer-404'" in out


@pytest.mark.parametrize(
    "args",
    [
        pytest.param(["trade_submissions", "offer-1"], id="claim-without-a-choice"),
        pytest.param(["--as", "cancel"], id="choice-without-a-claim"),
        pytest.param(["trade_submissions", "offer-1", "--as", "not-published"], id="unknown-choice"),
    ],
)
def test_reconcile_refuses_an_incomplete_or_unknown_choice_as_a_usage_error(run, args):
    code, out = run("trades", "reconcile", *args)
    assert code == 2, out


def test_a_claim_whose_first_publish_may_be_under_way_is_refused_until_it_is_stale(publisher):
    _stuck_claim("offer-in-flight", age_seconds=1)
    with pytest.raises(TradeError, match="is being published"):
        _reconcile("offer-in-flight", Resolution.CANCEL)
    _backdate("offer-in-flight", 120)
    entry = _reconcile("offer-in-flight", Resolution.CANCEL)
    assert entry.status == "cancelled"


def test_a_set_aside_claim_that_still_cannot_be_sent_stays_set_aside_and_can_be_cancelled(
    publisher, amqp_vhost, read_queue
):
    _set_aside("offer-spoiled", amqp_vhost)
    with pytest.raises(UnusableTradeClaim, match="not an object"):
        _reconcile("offer-spoiled", Resolution.REPUBLISH, publisher)
    entry = trades.get_entry("trade_submissions", "offer-spoiled")
    assert entry.status == "set_aside" and entry.resolution is None
    entry = _reconcile("offer-spoiled", Resolution.CANCEL)
    assert (entry.status, entry.resolution) == ("cancelled", "cancel")
    publisher.declare_durable(["trade_submissions"])  # nothing declared it: nothing was ever sent
    assert read_queue("trade_submissions") == []


def test_republishing_while_the_broker_is_away_leaves_the_claim_pending_for_the_drain(publisher, amqp_vhost):
    uncertain_offer(amqp_vhost, offer_key="offer-1")
    with AmqpPublisher(url="amqp://guest:guest@127.0.0.1:1/%2F", connect_timeout=1) as down:
        entry = _reconcile("offer-1", Resolution.REPUBLISH, down)
    assert (entry.status, entry.resolution) == ("pending", "republish")  # known unsent now
    assert trades.redeliverable_trades() == 1 and claims_to_reconcile() == []


def test_operators_racing_to_republish_one_claim_send_it_once(publisher, amqp_vhost, read_queue):
    lost = uncertain_offer(amqp_vhost, offer_key="offer-1")

    def republish_it(go):
        with AmqpPublisher(url=amqp_vhost) as own:
            go()
            return _reconcile("offer-1", Resolution.REPUBLISH, own)

    done, refused = race(republish_it, callers=4)
    assert [e.status for e in done] == ["published"]
    assert len(refused) == 3 and all("not waiting for an operator" in str(e) for e in refused)
    assert [p.message_id for _, p in read_queue("trade_submissions")] == [lost.message_id]


@pytest.mark.parametrize(
    ("broker", "publish"),
    [
        pytest.param("up", "published", id="the-publish-went-out"),
        pytest.param("away", "pending", id="the-broker-was-away"),
    ],
)
def test_a_claim_cancelled_while_its_first_publish_is_under_way_stays_cancelled(
    publisher, amqp_vhost, monkeypatch, caplog, broker, publish
):
    own = publisher if broker == "up" else AmqpPublisher(url=DOWN_URL, connect_timeout=1)
    send = own.publish

    def an_operator_cancels_it_meanwhile(message):  # the publish hung past the stale age
        _backdate("offer-1", 120)
        entry = _reconcile("offer-1", Resolution.CANCEL)
        assert entry.status == "cancelled"
        send(message)

    monkeypatch.setattr(own, "publish", an_operator_cancels_it_meanwhile)
    with caplog.at_level(logging.WARNING, logger="publisher.trades"):
        offer(own, offer_key="offer-1")
    own.close()

    entry = trades.get_entry("trade_submissions", "offer-1")
    assert (entry.status, entry.resolution, entry.resolved_by) == ("cancelled", "cancel", "ops")
    assert trades.redeliverable_trades() == 0 and claims_to_reconcile() == []  # the drain never sends it
    [line] = [r.getMessage() for r in caplog.records if "first publish was under way" in r.getMessage()]
    assert "stays cancelled" in line and "key=offer-1" in line and f"publish={publish}" in line


def test_trades_retry_sends_a_pending_offer_again_with_its_message_id_and_audits_it(run, read_queue):
    from models.audit import audit_entries

    lost = pending_offer(offer_key="offer-r1")
    code, out = run("trades", "retry", "trade_submissions", "offer-r1", "--reason", "broker back", "--json")
    assert code == 0 and json.loads(out)["status"] == "published"
    [(_, props)] = read_queue("trade_submissions")
    assert props.message_id == lost.message_id
    [entry] = audit_entries(action="trade.retry")
    assert entry.target_id == "trade_submissions/offer-r1" and entry.reason == "broker back"
    code, out = run("trades", "retry", "trade_submissions", "offer-r1")
    assert code != 0 and "only a failed or pending offer can be retried" in out


@pytest.mark.parametrize("how", ["retry", "reconcile-republish"])
def test_a_resend_whose_audit_entry_cannot_be_written_sends_nothing(
    db, fresh_queues, amqp_vhost, read_queue, how
):
    """Issue 35: no act without its record. The entry is written before the send, so a reason the
    audit refuses (a NUL) refuses the resend: nothing reaches the queue and the claim stays as it was."""
    from config.errors import InvalidText
    from models.audit import Actor, AuditContext, audit_entries

    lost = pending_offer(offer_key="offer-unrecorded")
    if how == "reconcile-republish":
        database.execute_sql(
            "UPDATE execution_log SET status = 'uncertain' WHERE claim_key = 'offer-unrecorded'"
        )
    unwritable = AuditContext(Actor.cli(), "bad\x00reason")
    with AmqpPublisher(url=amqp_vhost) as up, pytest.raises(InvalidText):
        up.declare_durable(["trade_submissions"])  # so an empty queue can be read
        if how == "retry":
            trades.retry_claim(
                queue="trade_submissions", claim_key="offer-unrecorded", publisher=up, audit=unwritable
            )
        else:
            reconcile_claim(
                queue="trade_submissions",
                claim_key="offer-unrecorded",
                resolution=Resolution.REPUBLISH,
                operator="op",
                publisher=up,
                audit=unwritable,
            )
    assert read_queue("trade_submissions") == []
    assert status_of("offer-unrecorded", "trade_submissions") == (
        "pending" if how == "retry" else "uncertain"
    )
    assert audit_entries() == [] and lost.status is TradeStatus.PENDING
