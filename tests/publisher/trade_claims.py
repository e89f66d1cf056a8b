"""Trade claims in the states the drain and an operator meet: pending, uncertain, poisoned."""

from __future__ import annotations

import json
from typing import Any

from harness.faultproxy import FaultProxy
from models.db import database
from publisher import trades
from publisher.amqp import AmqpPublisher
from publisher.queues import TRADE_SUBMISSIONS
from publisher.trades import TradeStatus
from tests.publisher.helpers import offer

RABBITMQ = ("127.0.0.1", 5672)
DOWN_URL = "amqp://guest:guest@127.0.0.1:1/%2F"


def uncertain_offer(amqp_vhost: str, *, reaches_broker: bool = False, **kw: Any) -> trades.TradeResult:
    """Approve an offer whose confirm never comes: uncertain.

    The publisher reaches RabbitMQ through a fault proxy and declares the queue; then the link
    breaks after the send and before the confirm: the proxy swallows the broker's answers
    (``reaches_broker``: RabbitMQ holds the message, only its confirm is lost) or every byte
    (a black hole: the message never arrives). Either way the confirm wait ends in
    PublishUncertainError and the publisher drops the connection.
    """
    with FaultProxy(RABBITMQ) as proxy:
        pub = AmqpPublisher(url=proxy.url_via(amqp_vhost), confirm_timeout=0.3, connect_timeout=1.0)
        try:
            pub.check_queue(TRADE_SUBMISSIONS)  # connected and declared before the link breaks
            if reaches_broker:
                proxy.drop_replies()
            else:
                proxy.blackhole()
            result = offer(pub, **kw)
        finally:
            pub.close()
    assert result.status is TradeStatus.UNCERTAIN, result
    return result


def pending_offer(**kw: Any) -> trades.TradeResult:
    """Approve an offer while RabbitMQ is unreachable: pending (known unsent)."""
    with AmqpPublisher(url=DOWN_URL, connect_timeout=1) as down:
        result = offer(down, **kw)
    assert result.status is TradeStatus.PENDING, result
    return result


def assert_resent(messages: list[tuple[Any, Any]], lost: trades.TradeResult, *, sent: bool) -> None:
    """What a reconcile left on trade_submissions (``messages``, as read_queue reads them): the lost
    offer again under its message id when it was ``sent``, else nothing."""
    if sent:
        [(body, props)] = messages
        assert props.message_id == lost.message_id and body["offer_key"] == lost.claim_key
    else:
        assert messages == []


def poison(claim_key: str, *, body: Any = None, queue: str | None = None) -> None:
    """Spoil a stored claim of trade_submissions: replace its body and/or its queue."""
    if body is not None:
        database.execute_sql(
            "UPDATE execution_log SET body = %s WHERE queue = %s AND claim_key = %s",
            (json.dumps(body), TRADE_SUBMISSIONS, claim_key),
        )
    if queue is not None:
        database.execute_sql(
            "UPDATE execution_log SET queue = %s WHERE queue = %s AND claim_key = %s",
            (queue, TRADE_SUBMISSIONS, claim_key),
        )


def status_of(claim_key: str, queue: str = TRADE_SUBMISSIONS) -> str:
    return trades.get_entry(queue, claim_key).status
